package reconciler_test

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/reconciler/eventnote"
	"github.com/peppy-ratio/lbregistrar/reconciler/gates"
	"github.com/peppy-ratio/lbregistrar/reconciler/metrics"
	"github.com/peppy-ratio/lbregistrar/reconciler/readiness"
	"github.com/peppy-ratio/lbregistrar/test/ociemu"
)

// gatedPod creates a pod of Service app, with lbregistrar's readiness gate
// and its label as the webhook gives them, on node, its containers ready as
// its kubelet reports once they start; and the endpoint the EndpointSlice
// controller lists for it at ip, not ready while the gate keeps it waiting.
func (f *fixture) gatedPod(app, name, node, ip string) (*corev1.Pod, discoveryv1.Endpoint) {
	f.t.Helper()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name, Labels: map[string]string{"app": app, v1beta1.ReadinessGateLabel: ""}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "app", Image: "app"}},
			ReadinessGates: []corev1.PodReadinessGate{{ConditionType: v1beta1.ReadinessGate}}}}
	f.must(f.api.Create(f.ctx, pod))
	f.must(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		f.must(f.api.Get(f.ctx, client.ObjectKeyFromObject(pod), pod))
		pod.Status.PodIP, pod.Status.PodIPs = ip, []corev1.PodIP{{IP: ip}}
		pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: corev1.ContainersReady, Status: corev1.ConditionTrue})
		return f.api.Status().Update(f.ctx, pod)
	}))
	return pod, discoveryv1.Endpoint{Addresses: []string{ip}, NodeName: ptr.To(node),
		Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(false), Serving: ptr.To(false), Terminating: ptr.To(false)},
		TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: f.ns, Name: name, UID: pod.UID}}
}

// expectGate waits for pod's gate condition to have status and reason and
// mention every text of mentions.
func (f *fixture) expectGate(pod *corev1.Pod, status corev1.ConditionStatus, reason string, mentions ...string) {
	f.t.Helper()
	f.eventually(30*time.Second, func() error {
		var cur corev1.Pod
		f.must(f.api.Get(f.ctx, client.ObjectKeyFromObject(pod), &cur))
		for _, c := range cur.Status.Conditions {
			if c.Type != v1beta1.ReadinessGate {
				continue
			}
			if c.Status != status || c.Reason != reason {
				return fmt.Errorf("%s's gate: %s %s %q, want %s %s", pod.Name, c.Status, c.Reason, c.Message, status, reason)
			}
			for _, m := range mentions {
				if !strings.Contains(c.Message, m) {
					return fmt.Errorf("%s's gate says %q, not %q", pod.Name, c.Message, m)
				}
			}
			return nil
		}
		return fmt.Errorf("%s has no gate condition yet", pod.Name)
	})
}

// expectPodEvent waits for an Event of reason about pod that mentions text.
func (f *fixture) expectPodEvent(pod *corev1.Pod, reason, text string) {
	f.t.Helper()
	f.eventually(10*time.Second, func() error {
		var evs eventsv1.EventList
		f.must(f.api.List(f.ctx, &evs, client.InNamespace(pod.Namespace)))
		for _, e := range evs.Items {
			if e.Regarding.Name == pod.Name && e.Reason == reason && strings.Contains(e.Note, text) {
				return nil
			}
		}
		return fmt.Errorf("no %s event for %s mentioning %q", reason, pod.Name, text)
	})
}

// The README's first example: a node pool selected by nodeSelector, its
// nodes following the endpoints. A pod the scheduler places off the pool,
// on a node excluded from load balancers or on one leaving, is registered
// nowhere, so its gate does not wait: it goes through at once, and an
// Event says why. A pod on the pool waits for its node.
func TestGateWaitsOnlyForWhatIsWritten(t *testing.T) {
	f := newFixture(t, ociemu.Options{})
	pool := func(n *corev1.Node) { n.Labels["pool"] = "ingress" }
	f.node(f.ns+"-a", "10.0.81.1", pool)
	f.node(f.ns+"-b", "10.0.81.2")
	f.node(f.ns+"-c", "10.0.81.3", pool, func(n *corev1.Node) { n.Labels[corev1.LabelNodeExcludeBalancers] = "true" })
	f.node(f.ns+"-d", "10.0.81.4", pool, func(n *corev1.Node) {
		n.Spec.Taints = []corev1.Taint{{Key: "karpenter.sh/disrupted", Effect: corev1.TaintEffectNoSchedule}}
	})
	svc := f.service("gw", corev1.ServicePort{Name: "https", Port: 443})
	f.startManager(f.options())
	target := v1beta1.Target{Namespace: f.ns, Name: "gw", Port: ptr.To(intstr.FromString("https")), BackendSetName: "api", Weight: 1, FilterByEndpoints: true}
	f.registrar("pool", classicLB, []v1beta1.Target{target}, func(o *v1beta1.LBRegistrar) {
		o.Spec.NodeSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"pool": "ingress"}}
	})
	onPool, epA := f.gatedPod("gw", "on-pool", f.ns+"-a", "10.1.81.1")
	offPool, epB := f.gatedPod("gw", "off-pool", f.ns+"-b", "10.1.81.2")
	onExcluded, epC := f.gatedPod("gw", "on-excluded", f.ns+"-c", "10.1.81.3")
	onLeaving, epD := f.gatedPod("gw", "on-leaving", f.ns+"-d", "10.1.81.4")
	f.endpointSliceAt("gw", epA, epB, epC, epD)

	f.expectBackends(classicLB, "api", fmt.Sprintf("10.0.81.1:%d/1", svc.Spec.Ports[0].NodePort))
	f.expectGate(onPool, corev1.ConditionTrue, v1beta1.ReasonLoadBalancerReady, "10.0.81.1")
	for pod, why := range map[*corev1.Pod]string{offPool: "not selected by spec.nodeSelector", onExcluded: "excluded from load balancers", onLeaving: "leaving"} {
		f.expectGate(pod, corev1.ConditionTrue, v1beta1.ReasonNotRegistered, why)
		f.expectPodEvent(pod, v1beta1.ReasonNotRegistered, why)
	}
}

// endpointSliceAt replaces the Service's EndpointSlice with eps as given,
// addresses and all, serving the Service's ports.
func (f *fixture) endpointSliceAt(service string, eps ...discoveryv1.Endpoint) {
	f.t.Helper()
	f.endpointSlice(service)
	s := &discoveryv1.EndpointSlice{}
	f.must(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		f.must(f.api.Get(f.ctx, client.ObjectKey{Namespace: f.ns, Name: service + "-slice"}, s))
		s.Endpoints = eps
		return f.api.Update(f.ctx, s)
	}))
}

// When the controller cannot write a pod's backend, the gate is blocked:
// it keeps the rollout waiting and says why, naming the resource: an
// identity it may not use, the resource suspended, a Conflict over the
// backend set. The waiting pod is counted as blocked, and the release
// annotation lets it through.
func TestGateIsBlockedWhenTheControllerCannotWrite(t *testing.T) {
	f := newFixture(t, ociemu.Options{})
	f.node(f.ns+"-a", "10.0.82.1")
	f.clusterIPService("web")
	f.startManager(f.options())
	obj := f.registrar("web", classicLB, []v1beta1.Target{podTargetOf(f.ns, "web", "api", 1)}, func(o *v1beta1.LBRegistrar) {
		o.Spec.APIKey.PrivateKey.SecretKeyRef.Name = "no-such-secret"
	})
	pod, ep := f.gatedPod("web", "web-1", f.ns+"-a", "10.1.82.1")
	f.podSlice("web", ep)
	f.expectGate(pod, corev1.ConditionFalse, v1beta1.ReasonLoadBalancerBlocked, "LBRegistrar "+obj.Name+" cannot write", v1beta1.ReasonSecretNotFound, v1beta1.ReleaseGatesAnnotation)
	f.expectPodEvent(pod, v1beta1.ReasonLoadBalancerBlocked, obj.Name)
	f.eventually(10*time.Second, func() error {
		if n := testutil.ToFloat64(metrics.GatesWaiting.WithLabelValues(readiness.WaitBlocked)); n < 1 {
			return fmt.Errorf("%v pods counted as blocked", n)
		}
		if testutil.ToFloat64(metrics.OldestGateWaitStart) == 0 {
			return fmt.Errorf("no oldest wait")
		}
		return nil
	})
	if got := f.backends(classicLB, "api"); len(got) != 0 {
		t.Fatalf("backends %v registered by a resource that cannot sign in", got)
	}

	f.updateRegistrar(obj, func(o *v1beta1.LBRegistrar) { o.Spec.Suspend = true })
	f.expectGate(pod, corev1.ConditionFalse, v1beta1.ReasonLoadBalancerBlocked, "suspended")

	f.updateRegistrar(obj, func(o *v1beta1.LBRegistrar) {
		o.Annotations = map[string]string{v1beta1.ReleaseGatesAnnotation: "true"}
	})
	f.expectGate(pod, corev1.ConditionTrue, v1beta1.ReasonGatesReleased, obj.Name)
	f.expectPodEvent(pod, v1beta1.ReasonGatesReleased, obj.Name)
}

// A Conflict over the backend set blocks the gates of the pods the losing
// resource gates, naming the resource that keeps the set.
func TestGateIsBlockedByAConflict(t *testing.T) {
	f := newFixture(t, ociemu.Options{})
	f.node(f.ns+"-a", "10.0.83.1")
	f.clusterIPService("web")
	f.clusterIPService("shop")
	f.startManager(f.options())
	holder := f.registrar("holder", classicLB, []v1beta1.Target{podTargetOf(f.ns, "shop", "api", 1)})
	_, shopEP := f.gatedPod("shop", "shop-1", f.ns+"-a", "10.1.83.9")
	f.podSlice("shop", shopEP)
	f.expectBackends(classicLB, "api", "10.1.83.9:8080/1")
	late := f.registrar("late", classicLB, []v1beta1.Target{podTargetOf(f.ns, "web", "api", 1)})
	f.expectConflict(late, holder.Name)
	pod, ep := f.gatedPod("web", "web-1", f.ns+"-a", "10.1.83.1")
	f.podSlice("web", ep)
	f.expectGate(pod, corev1.ConditionFalse, v1beta1.ReasonLoadBalancerBlocked, "LBRegistrar "+holder.Name+" keeps this backend set")
}

// Without health reads (serve --backend-health=false) a gate decides on
// registration alone: a Pod target's pod goes through once its backend is
// written, and no gate waits forever for a health that is never read.
func TestGateWithoutHealthReadsDecidesOnRegistration(t *testing.T) {
	f := newFixture(t, ociemu.Options{})
	f.node(f.ns+"-a", "10.0.84.1")
	f.clusterIPService("web")
	o := f.options()
	o.BackendHealth = false
	f.startManager(o)
	f.registrar("web", classicLB, []v1beta1.Target{podTargetOf(f.ns, "web", "api", 1)})
	pod, ep := f.gatedPod("web", "web-1", f.ns+"-a", "10.1.84.1")
	f.podSlice("web", ep)
	f.expectBackends(classicLB, "api", "10.1.84.1:8080/1")
	f.expectGate(pod, corev1.ConditionTrue, v1beta1.ReasonLoadBalancerReady, "10.1.84.1:8080")
}

// A gate opening asks for no reconcile: the pod, ready but for its gate,
// stands registered already, so neither the kubelet making it Ready nor
// its endpoint turning ready reads the load balancer. (Such a reconcile
// would open a batch of endpoint changes moments before the changes the
// gate lets through, the Deployment's next pods, which would miss it.)
// A change that matters still does: the pod's containers failing drain
// its backend, and their being ready again, its gate open all along,
// serves it again.
func TestAGateOpeningAsksForNoReconcile(t *testing.T) {
	f := newFixture(t, ociemu.Options{})
	node := f.ns + "-a"
	f.node(node, "10.0.92.1")
	f.clusterIPService("web")
	o := f.options()
	o.BackendHealth = false
	f.startManager(o)
	f.registrar("web", classicLB, []v1beta1.Target{podTargetOf(f.ns, "web", "api", 1)})
	pod, ep := f.gatedPod("web", "web-1", node, "10.1.92.1")
	other := podAt("10.1.92.2", node, true)
	f.podSlice("web", ep, other)
	f.expectBackends(classicLB, "api", "10.1.92.1:8080/1", "10.1.92.2:8080/1")
	f.expectGate(pod, corev1.ConditionTrue, v1beta1.ReasonLoadBalancerReady)
	f.eventually(10*time.Second, func() error { // the reconciles the gate's opening finished
		settled := f.reads(classicLB)
		time.Sleep(300 * time.Millisecond)
		if n := f.reads(classicLB) - settled; n > 0 {
			return fmt.Errorf("%d reads of the backend set still", n)
		}
		return nil
	})

	opened := f.reads(classicLB)
	f.must(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		f.must(f.api.Get(f.ctx, client.ObjectKeyFromObject(pod), pod))
		pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue})
		return f.api.Status().Update(f.ctx, pod)
	}))
	ep.Conditions = discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)}
	f.podSlice("web", ep, other)
	time.Sleep(time.Second)
	if n := f.reads(classicLB) - opened; n > 0 {
		t.Errorf("the pod turning Ready, its gate open, read the backend set %d times; want none", n)
	}

	containersReady := func(ready bool) {
		status := corev1.ConditionFalse
		if ready {
			status = corev1.ConditionTrue
		}
		f.must(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			f.must(f.api.Get(f.ctx, client.ObjectKeyFromObject(pod), pod))
			for i, c := range pod.Status.Conditions {
				if c.Type == corev1.ContainersReady || c.Type == corev1.PodReady {
					pod.Status.Conditions[i].Status = status
				}
			}
			return f.api.Status().Update(f.ctx, pod)
		}))
		ep.Conditions.Ready, ep.Conditions.Serving = ptr.To(ready), ptr.To(ready)
		f.podSlice("web", ep, other)
	}
	containersReady(false)
	f.expectBackends(classicLB, "api", "10.1.92.2:8080/1")
	containersReady(true)
	f.expectBackends(classicLB, "api", "10.1.92.1:8080/1", "10.1.92.2:8080/1")
}

// The gate's patch carries the pod's UID: a pod deleted and created again
// under its name is never given its predecessor's verdict.
func TestGatePatchIsForOnePod(t *testing.T) {
	f := newFixture(t, ociemu.Options{})
	old, _ := f.gatedPod("web", "web-1", "", "10.1.85.1")
	f.must(f.api.Delete(f.ctx, old, client.GracePeriodSeconds(0)))
	f.eventually(10*time.Second, func() error {
		if err := f.api.Get(f.ctx, client.ObjectKeyFromObject(old), &corev1.Pod{}); client.IgnoreNotFound(err) == nil && err != nil {
			return nil
		}
		return fmt.Errorf("the old pod is still there")
	})
	renewed, _ := f.gatedPod("web", "web-1", "", "10.1.85.1")
	_, _, err := gates.SetGate(f.ctx, f.api, old, readiness.Verdict{Ready: true, Reason: v1beta1.ReasonLoadBalancerReady, Message: "for the old pod"})
	if err == nil {
		t.Fatal("a gate patch for the old pod applied to the new one")
	}
	f.must(f.api.Get(f.ctx, client.ObjectKeyFromObject(renewed), renewed))
	for _, c := range renewed.Status.Conditions {
		if c.Type == v1beta1.ReadinessGate {
			t.Errorf("the new pod got the old one's gate: %+v", c)
		}
	}
}

// OCI refusing a pod's backend (here its backend limit) blocks the pod's
// gate, saying so, while the pod it would replace keeps serving.
func TestGateIsBlockedWhileOCIRefusesTheBackend(t *testing.T) {
	f := newFixture(t, ociemu.Options{BackendsPerBackendSet: 1})
	f.node(f.ns+"-a", "10.0.86.1")
	f.clusterIPService("web")
	f.startManager(f.options())
	f.registrar("web", classicLB, []v1beta1.Target{podTargetOf(f.ns, "web", "api", 1)})
	f.podSlice("web", podAt("10.1.86.1", f.ns+"-a", true))
	f.expectBackends(classicLB, "api", "10.1.86.1:8080/1")
	pod, ep := f.gatedPod("web", "web-2", f.ns+"-a", "10.1.86.2")
	f.podSlice("web", podAt("10.1.86.1", f.ns+"-a", true), ep)
	f.expectGate(pod, corev1.ConditionFalse, v1beta1.ReasonLoadBalancerBlocked, "OCI refused adding", "LimitExceeded")
	f.expectBackends(classicLB, "api", "10.1.86.1:8080/1")
}

// An Event's note longer than the API server takes (a gate blocked by
// several nodes' OCI errors) is refused, and the Event lost, unless cut to
// fit (eventnote.Fit).
func TestLongEventNotesAreCut(t *testing.T) {
	skipWithoutAPIServer(t)
	long := strings.Repeat("node node-0: GetInstance: 404 NotAuthorizedOrNotFound; ", 20)
	event := func(note string) *eventsv1.Event {
		return &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "default", GenerateName: "note-"},
			EventTime: metav1.NowMicro(), ReportingController: "lbregistrar", ReportingInstance: "test",
			Action: "ReadinessGate", Reason: v1beta1.ReasonLoadBalancerBlocked, Type: corev1.EventTypeWarning,
			Regarding: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web"}, Note: note}
	}
	ctx := context.Background()
	if err := k8s.Create(ctx, event(long)); !apierrors.IsInvalid(err) {
		t.Errorf("the API server took a note of %d bytes: %v", len(long), err)
	}
	if err := k8s.Create(ctx, event(eventnote.Fit(long))); err != nil {
		t.Errorf("the cut note: %v", err)
	}
}

// A pod whose backend is registered waits for OCI's health alone, not for
// the writes of the pods after it: a pod found healthy while another
// pod's write waits out its work request has its gate True as that write
// lands, before the next one (for a third pod, come meanwhile) is sent
// and waited out too.
func TestGateDoesNotWaitForTheNextWrites(t *testing.T) {
	port := freePort(t)
	const latency = 3 * time.Second
	f := newFixture(t, ociemu.Options{WorkRequestLatency: latency,
		StandIns: map[string]string{"10.1.57.11": "127.0.0.1", "10.1.57.12": "127.0.0.2", "10.1.57.13": "127.0.0.3"}})
	node := f.ns + "-a"
	f.node(node, "10.0.57.1")
	f.clusterIPService("web")
	f.startManager(f.options())
	f.registrar("next-writes", classicLB, []v1beta1.Target{podTargetOf(f.ns, "web", "health", 1)})
	first, ep1 := f.gatedPod("web", "first", node, "10.1.57.11")
	_, ep2 := f.gatedPod("web", "second", node, "10.1.57.12")
	_, ep3 := f.gatedPod("web", "third", node, "10.1.57.13")
	f.podSliceOn("web", port, ep1)
	backend := func(ep discoveryv1.Endpoint) string { return fmt.Sprintf("%s:%d/1", ep.Addresses[0], port) }
	seeded := "192.168.9.9:30999/1"
	f.expectBackends(classicLB, "health", seeded, backend(ep1))
	f.expectGate(first, corev1.ConditionFalse, v1beta1.ReasonLoadBalancerPending) // its port does not answer

	f.podSliceOn("web", port, ep1, ep2)
	f.eventually(10*time.Second, func() error { // the second pod's write is under way
		if wrs := f.emu.WorkRequests(); len(wrs) < 2 || wrs[0].Status == "SUCCEEDED" {
			return fmt.Errorf("no write in flight after the first")
		}
		return nil
	})
	listen(t, net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port)))) // found healthy during it
	f.podSliceOn("web", port, ep1, ep2, ep3)
	f.expectBackends(classicLB, "health", seeded, backend(ep1), backend(ep2))
	f.expectGate(first, corev1.ConditionTrue, v1beta1.ReasonLoadBalancerReady)
	if got := f.backends(classicLB, "health"); slices.Contains(got, backend(ep3)) {
		t.Errorf("the first pod's gate waited for the third pod's write: %v", got)
	}
}

// A pod behind its node (externalTrafficPolicy: Local) on a node that
// serves the Service already (another ready pod there) goes through on
// the node's health as read: that health is kube-proxy's answer, which
// counts only ready endpoints, the same before the pod came as after it
// until it is Ready. It never waits the settle time of a pod at a gone
// pod's address (here 600 ms, which the gate's condition would say).
func TestGateBehindAServingNodeCountsItsHealthAsRead(t *testing.T) {
	f := newFixture(t, ociemu.Options{})
	node := f.ns + "-a"
	f.node(node, "127.0.0.1")
	svc := f.service("gw", corev1.ServicePort{Name: "https", Port: 443})
	svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	f.must(f.api.Update(f.ctx, svc))
	nodePort := strconv.Itoa(int(svc.Spec.Ports[0].NodePort))
	listen(t, net.JoinHostPort("127.0.0.1", nodePort)) // kube-proxy answering for the ready pod there
	o := f.options()
	o.Resync = 100 * time.Millisecond // health is read on each resync
	f.startManager(o)
	obj := f.registrar("local", classicLB, []v1beta1.Target{{Namespace: f.ns, Name: "gw", Port: ptr.To(intstr.FromString("https")), BackendSetName: "health", Weight: 1}})
	ready := discoveryv1.Endpoint{Addresses: []string{"10.1.59.1"}, NodeName: ptr.To(node), Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
		TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: f.ns, Name: "serving"}}
	f.endpointSliceAt("gw", ready)
	f.expectBackends(classicLB, "health", "127.0.0.1:"+nodePort+"/1", "192.168.9.9:30999/1")
	f.eventually(30*time.Second, func() error {
		if healthy := f.get(obj).Status.Healthy; healthy != "1/1" {
			return fmt.Errorf("healthy %q, want the node OK", healthy)
		}
		return nil
	})

	pod, ep := f.gatedPod("gw", "arriving", node, "10.1.59.2")
	said := make(chan []string)
	stop := make(chan struct{})
	go func() { // every message the gate's condition had on its way
		var messages []string
		for {
			var cur corev1.Pod
			if err := f.api.Get(f.ctx, client.ObjectKeyFromObject(pod), &cur); err == nil {
				for _, c := range cur.Status.Conditions {
					if c.Type == v1beta1.ReadinessGate && !slices.Contains(messages, c.Message) {
						messages = append(messages, c.Message)
					}
				}
			}
			select {
			case <-stop:
				said <- messages
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	f.endpointSliceAt("gw", ready, ep)
	f.expectGate(pod, corev1.ConditionTrue, v1beta1.ReasonLoadBalancerReady, "127.0.0.1:"+nodePort)
	close(stop)
	for _, m := range <-said {
		if strings.Contains(m, "stood for another pod") {
			t.Errorf("the gate waited the settle time of a pod at a gone pod's address: %q", m)
		}
	}
}
