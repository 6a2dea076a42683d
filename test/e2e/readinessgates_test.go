package e2e

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/test/eventually"
	"github.com/peppy-ratio/lbregistrar/test/kube"
	"github.com/peppy-ratio/lbregistrar/test/ociemu"
)

// webPodsRegistrar registers the pods of Service shop/web into the classic
// load balancer's backend set "web-pods" (cmd/localrun/seed.yaml: HTTP
// health checks on each backend's own port, every second).
const webPodsRegistrar = `apiVersion: nodes.peppy-ratio.dev/v1beta1
kind: LBRegistrar
metadata:
  name: shop-web
spec:
  loadBalancerId: ` + classicIngress + `
  services:
  - {name: web, namespace: shop, port: http, targetType: Pod, backendSetName: web-pods, weight: 1}
` + apiKeySpec

// Pods of a Service an LBRegistrar registers, created in a namespace that
// opted in, are given the readiness gate by the admission webhook; the
// controller registers such a pod once its containers are ready (it is not
// Ready yet, the gate keeping it waiting) and sets the gate True once OCI's
// health check of its backend passes: a pod whose port answers goes through,
// one whose port does not keeps waiting. Pods elsewhere are left alone. The
// documented release lets a waiting pod through; a pod at a gone pod's
// address waits for its own health read; and the documented uninstall leaves
// no pod unready and gates no new one.
func TestReadinessGateWaitsForTheLoadBalancer(t *testing.T) {
	t.Parallel()
	// The pods answer at loopback stand-ins of their addresses; only
	// web-1's port has a server behind it.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: time.Second, Handler: http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})}
	go func() { _ = srv.Serve(l) }() // ends with the listener
	t.Cleanup(func() { srv.Close() })
	port := int32(l.Addr().(*net.TCPAddr).Port)
	emu := ociemu.StartSeeded(t, mustRoot(t)+"/cmd/localrun/seed.yaml", ociemu.Options{Region: "ap-tokyo-1", WorkRequestLatency: 200 * time.Millisecond,
		StandIns: map[string]string{"10.1.70.11": "127.0.0.1", "10.1.70.12": "127.0.0.2"}})
	c := kube.Start(t, kube.Options{Bare: true})
	kubectl(t, c, "", "create", "namespace", kube.Namespace)
	addNode(t, c, "node-a", "10.0.70.1")
	serveAdmitting(t, c, emu)
	ctx := testContext(t)

	for _, ns := range []string{"shop", "elsewhere"} {
		if err := c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	sh := newDocShell(t, c)
	sh.run(t, "docs/operations.md", "readiness-gates-opt-in")
	for _, ns := range []string{"shop", "elsewhere"} {
		if err := c.Client.Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
			Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"},
				Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(port)}}}}); err != nil {
			t.Fatal(err)
		}
	}
	kubectl(t, c, apiKeyFor(t, c, emu, webPodsRegistrar), "apply", "-f", "-")

	pod := func(ns, name string, labels map[string]string) *corev1.Pod {
		t.Helper()
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
			Spec: corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "web", Image: "web"}}}}
		if err := c.Client.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	gated := func(p *corev1.Pod) bool {
		return slices.ContainsFunc(p.Spec.ReadinessGates, func(g corev1.PodReadinessGate) bool { return g.ConditionType == v1beta1.ReadinessGate })
	}
	web := map[string]string{"app": "web"}
	// The pod webhook decides from its cache: wait until it has seen the
	// resource, the Services and the namespace's opt-in (a pod created at
	// once, on a busy machine, may come before them).
	eventually.Passes(t, 30*time.Second, 100*time.Millisecond, func() error {
		probe := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "probe", Labels: web},
			Spec: corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "web", Image: "web"}}}}
		if err := c.Client.Create(ctx, probe, client.DryRunAll); err != nil {
			return err
		}
		if !gated(probe) {
			return errors.New("the pod webhook does not gate a pod of shop/web yet")
		}
		return nil
	})
	web1, web2 := pod("shop", "web-1", web), pod("shop", "web-2", web)
	for _, p := range []*corev1.Pod{web1, web2} {
		if _, labelled := p.Labels[v1beta1.ReadinessGateLabel]; !gated(p) || !labelled {
			t.Fatalf("pod %s was not given the readiness gate and its label: %v %v", p.Name, p.Spec.ReadinessGates, p.Labels)
		}
	}
	for _, p := range []*corev1.Pod{pod("elsewhere", "web-1", web), pod("shop", "batch", map[string]string{"app": "batch"})} {
		if gated(p) {
			t.Errorf("pod %s/%s was given the readiness gate", p.Namespace, p.Name)
		}
	}
	// A pod whose template lists the gate, or carries its label, in a
	// namespace that did not opt in has them taken off: nothing there would
	// set the gate, and the controller caches only opted-in namespaces'
	// pods. Labelling a pod there later is refused by the API server
	// itself (the admission policy), so no pod outside them is cached.
	listed := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "elsewhere", Name: "listed", Labels: map[string]string{"app": "web", v1beta1.ReadinessGateLabel: ""}},
		Spec: corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "web", Image: "web"}},
			ReadinessGates: []corev1.PodReadinessGate{{ConditionType: "example.com/other"}, {ConditionType: v1beta1.ReadinessGate}}}}
	if err := c.Client.Create(ctx, listed); err != nil {
		t.Fatal(err)
	}
	if _, labelled := listed.Labels[v1beta1.ReadinessGateLabel]; labelled || gated(listed) || len(listed.Spec.ReadinessGates) != 1 {
		t.Errorf("a pod listing the gate outside an opted-in namespace kept it: %v %v", listed.Labels, listed.Spec.ReadinessGates)
	}
	_, stderr, err := c.Kubectl(ctx, "", "label", "pod", "-n", "elsewhere", "listed", v1beta1.ReadinessGateLabel+"=")
	if want := "the label " + v1beta1.ReadinessGateLabel + " is lbregistrar's"; err == nil || !strings.Contains(stderr, want) {
		t.Errorf("labelling a pod outside an opted-in namespace: want %q; err=%v stderr:\n%s", want, err, stderr)
	}

	// As a kubelet would have it: containers ready, the pod not Ready
	// while its gate is not True; and the EndpointSlice controller's view.
	ready := func(p *corev1.Pod, ip string) {
		t.Helper()
		// The controller may have written the gate's condition meanwhile.
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := c.Client.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
				return err
			}
			p.Status.Phase, p.Status.PodIP, p.Status.PodIPs = corev1.PodRunning, ip, []corev1.PodIP{{IP: ip}}
			p.Status.Conditions = append(p.Status.Conditions,
				corev1.PodCondition{Type: corev1.ContainersReady, Status: corev1.ConditionTrue}, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "ReadinessGatesNotReady"})
			return c.Client.Status().Update(ctx, p)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	endpointOf := func(p *corev1.Pod, ip string, isReady bool) discoveryv1.Endpoint {
		return discoveryv1.Endpoint{Addresses: []string{ip}, NodeName: ptr.To("node-a"),
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(isReady), Serving: ptr.To(isReady), Terminating: ptr.To(false)},
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: "shop", Name: p.Name, UID: p.UID}}
	}
	slice := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-x1", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		AddressType: discoveryv1.AddressTypeIPv4, Ports: []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To(port), Protocol: ptr.To(corev1.ProtocolTCP)}}}
	setSlice := func(endpoints ...discoveryv1.Endpoint) {
		t.Helper()
		slice.Endpoints = endpoints
		if slice.ResourceVersion == "" {
			if err := c.Client.Create(ctx, slice); err != nil {
				t.Fatal(err)
			}
			return
		}
		if err := c.Client.Update(ctx, slice); err != nil {
			t.Fatal(err)
		}
	}
	ready(web1, "10.1.70.11")
	ready(web2, "10.1.70.12")
	setSlice(endpointOf(web1, "10.1.70.11", false), endpointOf(web2, "10.1.70.12", false))

	p := strconv.Itoa(int(port))
	waitBackends(t, emu, "web-pods", time.Minute, "10.1.70.11:"+p, "10.1.70.12:"+p)
	gate := func(name string) corev1.PodCondition {
		var cur corev1.Pod
		if err := c.Client.Get(ctx, client.ObjectKey{Namespace: "shop", Name: name}, &cur); err != nil {
			t.Fatal(err)
		}
		for _, cond := range cur.Status.Conditions {
			if cond.Type == v1beta1.ReadinessGate {
				return cond
			}
		}
		return corev1.PodCondition{}
	}
	eventually.Passes(t, time.Minute, 250*time.Millisecond, func() error {
		if g := gate("web-1"); g.Status != corev1.ConditionTrue {
			return fmt.Errorf("web-1's gate: %+v", g)
		}
		return nil
	})
	eventually.Passes(t, 30*time.Second, 250*time.Millisecond, func() error {
		if g := gate("web-2"); g.Status != corev1.ConditionFalse || !strings.Contains(g.Message, "CRITICAL") {
			return fmt.Errorf("web-2's gate: %+v, want False, its backend CRITICAL", g)
		}
		return nil
	})
	if why := sh.run(t, "docs/operations.md", "readiness-gate-why", "web-7d4f9", "web-2"); !strings.Contains(why, "OCI reports it CRITICAL") {
		t.Errorf("the documented command says %q of web-2", why)
	}

	// The documented release lets web-2 through; taken back, a pod that
	// comes at web-2's address (web-2 gone) waits for a health read of
	// its own, and is kept waiting: its port does not answer either.
	sh.run(t, "docs/operations.md", "release-gates", "NAME", "shop-web")
	eventually.Passes(t, 30*time.Second, 250*time.Millisecond, func() error {
		if g := gate("web-2"); g.Status != corev1.ConditionTrue || g.Reason != v1beta1.ReasonGatesReleased {
			return fmt.Errorf("web-2's gate: %+v, want True, released", g)
		}
		return nil
	})
	kubectl(t, c, "", "annotate", "lbregistrar", "shop-web", v1beta1.ReleaseGatesAnnotation+"-")
	if err := c.Client.Delete(ctx, web2, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	web3 := pod("shop", "web-3", web)
	ready(web3, "10.1.70.12")
	setSlice(endpointOf(web1, "10.1.70.11", true), endpointOf(web3, "10.1.70.12", false))
	eventually.Passes(t, 30*time.Second, 250*time.Millisecond, func() error {
		if g := gate("web-3"); g.Status != corev1.ConditionFalse || !strings.Contains(g.Message, "10.1.70.12") {
			return fmt.Errorf("web-3's gate: %+v, want False, waiting for 10.1.70.12", g)
		}
		return nil
	})

	// docs/operations.md's uninstall, with web-3 waiting: no pod is left
	// unready, and pods created afterwards get no gate.
	sh.run(t, "docs/operations.md", "uninstall-release-gates")
	finalizingNamespaces(t, c)
	sh.run(t, "docs/operations.md", "uninstall-kustomize")
	var pods corev1.PodList
	if err := c.Client.List(ctx, &pods, client.InNamespace("shop"), client.HasLabels{v1beta1.ReadinessGateLabel}); err != nil {
		t.Fatal(err)
	}
	for i := range pods.Items {
		if g := gate(pods.Items[i].Name); g.Status != corev1.ConditionTrue {
			t.Errorf("after the uninstall %s's gate is %+v", pods.Items[i].Name, g)
		}
	}
	if p := pod("shop", "web-4", web); gated(p) {
		t.Errorf("a pod created after the uninstall was given the gate")
	}
}

// Two clusters register their pods into one backend set, as they do their
// nodes: each keeps the other's pods, records only its own, and a deletion
// in one removes only its own.
func TestTwoClustersShareABackendSetOfPods(t *testing.T) {
	t.Parallel()
	emu := seededEmulator(t, mustRoot(t)+"/cmd/localrun/seed.yaml", 200*time.Millisecond)
	clusters := map[string]*kube.Cluster{}
	for name, ip := range map[string]string{"blue": "10.1.71.11", "green": "10.1.72.11"} {
		c := kube.Start(t, kube.Options{Bare: true})
		clusters[name] = c
		kubectl(t, c, "", "create", "namespace", kube.Namespace)
		serveAdmitting(t, c, emu, "--drain-period=0s")
		ctx := testContext(t)
		if err := c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}); err != nil {
			t.Fatal(err)
		}
		if err := c.Client.Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"},
			Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}); err != nil {
			t.Fatal(err)
		}
		if err := c.Client.Create(ctx, &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: "shop", Name: "web-x1", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints: []discoveryv1.Endpoint{{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
				TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: "shop", Name: "web-" + name}}},
			Ports: []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)}},
		}); err != nil {
			t.Fatal(err)
		}
		kubectl(t, c, apiKeyFor(t, c, emu, webPodsRegistrar), "apply", "-f", "-")
	}
	waitBackends(t, emu, "web-pods", time.Minute, "10.1.71.11:8080", "10.1.72.11:8080")
	for name, c := range clusters {
		waitAllReady(t, c, 1, time.Minute)
		var reg v1beta1.LBRegistrar
		if err := c.Client.Get(testContext(t), client.ObjectKey{Name: "shop-web"}, &reg); err != nil {
			t.Fatal(err)
		}
		if len(reg.Status.BackendSets) != 1 || len(reg.Status.BackendSets[0].Owned()) != 1 {
			t.Errorf("%s records %+v, want its own pod alone", name, reg.Status.BackendSets)
		}
	}
	kubectl(t, clusters["blue"], "", "delete", "lbregistrar", "shop-web", "--timeout=2m")
	waitBackends(t, emu, "web-pods", time.Minute, "10.1.72.11:8080")
}

// The admission policy shipped beside the pod webhooks keeps lbregistrar's
// readiness gate and its label (which has the controller cache a pod) to
// namespaces that opted in, checked by the API server itself: while no
// lbregistrar replica answers, a pod elsewhere listing the gate or
// carrying the label is refused, and labelling one later is too; in an
// opted-in namespace both are taken. So whatever pods other namespaces
// create, the controller caches none of them.
func TestOnlyOptedInNamespacesCarryTheGate(t *testing.T) {
	t.Parallel()
	c := kube.Start(t, kube.Options{Bare: true})
	if err := c.PointWebhooksAt(testContext(t), kube.UnreachableURL, nil); err != nil {
		t.Fatal(err)
	}
	kubectl(t, c, `apiVersion: v1
kind: Namespace
metadata: {name: elsewhere}
---
apiVersion: v1
kind: Namespace
metadata: {name: shop, labels: {nodes.peppy-ratio.dev/readiness-gates: enabled}}
`, "apply", "-f", "-")
	pod := func(ns, name, extra string) string {
		return `apiVersion: v1
kind: Pod
metadata: {name: ` + name + `, namespace: ` + ns + `}
spec:
  containers: [{name: c, image: x}]
` + extra
	}
	const gate = "  readinessGates: [{conditionType: nodes.peppy-ratio.dev/load-balancer-ready}]\n"
	const label = "metadata: {name: labelled, namespace: elsewhere, labels: {nodes.peppy-ratio.dev/readiness-gate: \"\"}}"
	eventually.Passes(t, 30*time.Second, 250*time.Millisecond, func() error { // the API server loads policies in a moment
		_, stderr, err := c.Kubectl(testContext(t), pod("elsewhere", "gated", gate), "create", "--dry-run=server", "-f", "-")
		if want := "lbregistrar's readiness gate nodes.peppy-ratio.dev/load-balancer-ready is set only in namespaces labelled"; err == nil || !strings.Contains(stderr, want) {
			return fmt.Errorf("a pod listing the gate elsewhere: want %q; err=%w stderr: %s", want, err, stderr)
		}
		return nil
	})
	labelled := strings.Replace(pod("elsewhere", "labelled", ""), "metadata: {name: labelled, namespace: elsewhere}", label, 1)
	const byLabel = "the label nodes.peppy-ratio.dev/readiness-gate is lbregistrar's"
	if _, stderr, err := c.Kubectl(testContext(t), labelled, "create", "-f", "-"); err == nil || !strings.Contains(stderr, byLabel) {
		t.Errorf("a pod labelled elsewhere: want %q; err=%v stderr: %s", byLabel, err, stderr)
	}
	kubectl(t, c, pod("elsewhere", "plain", ""), "create", "-f", "-")
	if _, stderr, err := c.Kubectl(testContext(t), "", "label", "pod", "-n", "elsewhere", "plain", v1beta1.ReadinessGateLabel+"="); err == nil || !strings.Contains(stderr, byLabel) {
		t.Errorf("labelling a pod elsewhere: want %q; err=%v stderr: %s", byLabel, err, stderr)
	}
	kubectl(t, c, strings.Replace(pod("shop", "gated", gate), "namespace: shop}", "namespace: shop, labels: {nodes.peppy-ratio.dev/readiness-gate: \"\"}}", 1), "create", "-f", "-")
}
