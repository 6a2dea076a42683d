package reconciler_test

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/oracle/oci-go-sdk/v65/common"
	"github.com/oracle/oci-go-sdk/v65/loadbalancer"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/reconciler"
	"github.com/peppy-ratio/lbregistrar/test/ociemu"
)

// podSlice replaces the Service's EndpointSlice with endpoints at addresses,
// each with the conditions given, serving its port "http" on 8080.
func (f *fixture) podSlice(service string, eps ...discoveryv1.Endpoint) {
	f.t.Helper()
	f.podSliceOn(service, 8080, eps...)
}

// podSliceOn is podSlice with the pods serving port "http" on port.
func (f *fixture) podSliceOn(service string, port int32, eps ...discoveryv1.Endpoint) {
	f.t.Helper()
	s := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: service + "-pods"}}
	_, err := ctrl.CreateOrUpdate(f.ctx, f.api, s, func() error {
		s.Labels = map[string]string{discoveryv1.LabelServiceName: service}
		s.AddressType = discoveryv1.AddressTypeIPv4
		s.Ports = []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To(port), Protocol: ptr.To(corev1.ProtocolTCP)}}
		s.Endpoints = eps
		for i := range s.Endpoints { // as the EndpointSlice controller names each pod
			if s.Endpoints[i].TargetRef == nil {
				s.Endpoints[i].TargetRef = &corev1.ObjectReference{Kind: "Pod", Namespace: f.ns, Name: "pod-" + s.Endpoints[i].Addresses[0]}
			}
		}
		return nil
	})
	f.must(err)
}

// podAt is an endpoint at ip on node: ready, or terminating and still
// serving as the EndpointSlice controller shows a pod being deleted.
func podAt(ip, node string, ready bool) discoveryv1.Endpoint {
	c := discoveryv1.EndpointConditions{Ready: ptr.To(ready)}
	if !ready {
		c.Serving, c.Terminating = ptr.To(true), ptr.To(true)
	}
	return discoveryv1.Endpoint{Addresses: []string{ip}, NodeName: ptr.To(node), Conditions: c}
}

// clusterIPService creates a ClusterIP Service with port http (80 to the
// pods' 8080): pod targets need no node port.
func (f *fixture) clusterIPService(name string) {
	f.t.Helper()
	f.must(f.api.Create(f.ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": name},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}))
}

func (f *fixture) expectDegraded(o *v1beta1.LBRegistrar, reason string, mentions ...string) {
	f.t.Helper()
	f.eventually(20*time.Second, func() error {
		c := meta.FindStatusCondition(f.get(o).Status.Conditions, v1beta1.ConditionDegraded)
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != reason {
			return fmt.Errorf("degraded: %+v, want %s", c, reason)
		}
		for _, m := range mentions {
			if !strings.Contains(c.Message, m) {
				return fmt.Errorf("degraded message %q does not mention %q", c.Message, m)
			}
		}
		return nil
	})
}

func podTargetOf(namespace, service, set string, weight int32) v1beta1.Target {
	http := intstr.FromString("http")
	return v1beta1.Target{Namespace: namespace, Name: service, Port: &http, BackendSetName: set, Weight: weight, TargetType: v1beta1.TargetTypePod}
}

// Pod targets register each ready endpoint by the address and port its
// EndpointSlice gives, through the real SDK: a pod being deleted is
// drained for the drain period, a new one added, and a moment with no
// ready pod (all replaced at once) keeps what is registered rather than
// emptying the backend set.
func TestPodTargetsRegisterReadyEndpoints(t *testing.T) {
	f := newFixture(t, ociemu.Options{})
	node := f.ns + "-a"
	f.node(node, "10.0.50.1")
	f.clusterIPService("web")
	f.podSlice("web", podAt("10.1.50.11", node, true), podAt("10.1.50.12", node, true), podAt("10.1.50.13", node, false))
	o := f.options()
	o.NodeDrainPeriod = time.Hour
	f.startManager(o)
	obj := f.registrar("pods", classicLB, []v1beta1.Target{podTargetOf(f.ns, "web", "api", 2)})
	f.expectBackends(classicLB, "api", "10.1.50.11:8080/2", "10.1.50.12:8080/2")
	f.waitReady(obj, v1beta1.ReasonRegistered)

	// A rolling update: .11 terminates, .14 is ready.
	f.podSlice("web", podAt("10.1.50.11", node, false), podAt("10.1.50.12", node, true), podAt("10.1.50.14", node, true))
	f.expectBackends(classicLB, "api", "10.1.50.11:8080/2,drain", "10.1.50.12:8080/2", "10.1.50.14:8080/2")

	// No pod ready for a moment: the backend set keeps its registered
	// backends.
	writes := f.writesTo(classicLB, "api")
	f.podSlice("web", podAt("10.1.50.12", node, false), podAt("10.1.50.14", node, false))
	f.expectDegraded(obj, v1beta1.ReasonNoReadyEndpoints, "services[0]")
	f.expectBackends(classicLB, "api", "10.1.50.11:8080/2,drain", "10.1.50.12:8080/2", "10.1.50.14:8080/2")
	if n := f.writesTo(classicLB, "api"); n != writes {
		t.Errorf("%d writes with no ready pod, want none", n-writes)
	}
}

// Endpoint changes that come one after another (a pod terminating, the
// pods that replace it becoming ready) within --endpoint-batch-period of
// the first, with no pause of --endpoint-batch-quiet between them, are
// written together: one write, not one each.
func TestEndpointChangesWithinThePeriodShareAWrite(t *testing.T) {
	f := newFixture(t, ociemu.Options{})
	node := f.ns + "-a"
	f.node(node, "10.0.51.1")
	f.clusterIPService("web")
	f.podSlice("web", podAt("10.1.51.11", node, true), podAt("10.1.51.12", node, true))
	o := f.options()
	o.NodeDrainPeriod, o.EndpointBatchPeriod, o.EndpointBatchQuiet = time.Hour, time.Second, 500*time.Millisecond
	f.startManager(o)
	f.registrar("pods", classicLB, []v1beta1.Target{podTargetOf(f.ns, "web", "api", 1)})
	f.expectBackends(classicLB, "api", "10.1.51.11:8080/1", "10.1.51.12:8080/1")
	writes := f.writesTo(classicLB, "api")

	f.podSlice("web", podAt("10.1.51.11", node, false), podAt("10.1.51.12", node, true))
	f.podSlice("web", podAt("10.1.51.11", node, false), podAt("10.1.51.12", node, true), podAt("10.1.51.13", node, true))
	f.podSlice("web", podAt("10.1.51.11", node, false), podAt("10.1.51.12", node, true), podAt("10.1.51.13", node, true), podAt("10.1.51.14", node, true))
	f.expectBackends(classicLB, "api", "10.1.51.11:8080/1,drain", "10.1.51.12:8080/1", "10.1.51.13:8080/1", "10.1.51.14:8080/1")
	if n := f.writesTo(classicLB, "api") - writes; n != 1 {
		t.Errorf("%d writes for three endpoint changes within the batch period, want one", n)
	}
}

// A Service scaled to zero, its pods gone: the EndpointSlice controller
// keeps its placeholder slice, with no endpoint, and the pods' backends
// are drained for the node drain period, then removed, leaving what
// someone else registered. While the view is in doubt (no slice at all)
// they are kept.
func TestGonePodsLeave(t *testing.T) {
	f := newFixture(t, ociemu.Options{})
	node := f.ns + "-a"
	f.node(node, "10.0.87.1")
	f.clusterIPService("web")
	f.podSlice("web", podAt("10.1.87.11", node, true), podAt("10.1.87.12", node, true))
	o := f.options()
	o.NodeDrainPeriod = 2 * time.Second
	f.startManager(o)
	obj := f.registrar("pods", classicLB, []v1beta1.Target{podTargetOf(f.ns, "web", "api", 1)})
	f.expectBackends(classicLB, "api", "10.1.87.11:8080/1", "10.1.87.12:8080/1")

	// No slice at all for a moment (recreated, or not synced): kept.
	slice := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "web-pods"}}
	f.must(f.api.Delete(f.ctx, slice))
	f.expectDegraded(obj, v1beta1.ReasonNoReadyEndpoints, "services[0]")
	f.expectBackends(classicLB, "api", "10.1.87.11:8080/1", "10.1.87.12:8080/1")

	// The EndpointSlice controller's placeholder: the pods are gone.
	f.must(f.api.Create(f.ctx, &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "web-placeholder",
		Labels: map[string]string{discoveryv1.LabelServiceName: "web", discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io"}},
		AddressType: discoveryv1.AddressTypeIPv4, Ports: []discoveryv1.EndpointPort{}, Endpoints: []discoveryv1.Endpoint{}}))
	f.expectBackends(classicLB, "api", "10.1.87.11:8080/1,drain", "10.1.87.12:8080/1,drain")
	f.expectDegraded(obj, v1beta1.ReasonEndpointsGone, "services[0]")
	f.expectBackends(classicLB, "api")
}

// During a migration one backend set has both a Service port's node port
// and its pods registered, and the weight moves from one to the other,
// each step one write of the whole set, the pods' backend in every one;
// then the node-port target goes, and its backend with it.
func TestNodePortToPodMigrationInOneBackendSet(t *testing.T) {
	f := newFixture(t, ociemu.Options{})
	node := f.ns + "-a"
	f.node(node, "10.0.51.1")
	svc := f.service("web", corev1.ServicePort{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)})
	port := svc.Spec.Ports[0].NodePort
	f.podSlice("web", podAt("10.1.51.11", node, true))
	f.startManager(f.options())
	http := intstr.FromString("http")
	nodes := v1beta1.Target{Name: "web", Namespace: f.ns, Port: &http, BackendSetName: "api", Weight: 100}
	obj := f.registrar("migrate", classicLB, []v1beta1.Target{nodes, podTargetOf(f.ns, "web", "api", 1)})
	onNode := fmt.Sprintf("10.0.51.1:%d", port)
	f.expectBackends(classicLB, "api", onNode+"/100", "10.1.51.11:8080/1")

	f.updateRegistrar(obj, func(o *v1beta1.LBRegistrar) { o.Spec.Services[0].Weight, o.Spec.Services[1].Weight = 1, 100 })
	f.expectBackends(classicLB, "api", onNode+"/1", "10.1.51.11:8080/100")
	f.updateRegistrar(obj, func(o *v1beta1.LBRegistrar) { o.Spec.Services = o.Spec.Services[1:] })
	f.expectBackends(classicLB, "api", "10.1.51.11:8080/100")
}

// On an overlay network (flannel: a pod's address in its node's podCIDR)
// the load balancer cannot reach pods: lbregistrar says so rather than
// registering addresses that can never answer, and still registers the
// pods it can reach (host-network pods, those on virtual nodes).
func TestPodTargetsOnAnOverlayAreReported(t *testing.T) {
	f := newFixture(t, ociemu.Options{})
	overlay, virtual := f.ns+"-flannel", f.ns+"-virtual"
	f.node(overlay, "10.0.52.1", func(n *corev1.Node) { n.Spec.PodCIDR, n.Spec.PodCIDRs = "10.244.52.0/24", []string{"10.244.52.0/24"} })
	f.node(virtual, "10.0.52.2")
	f.clusterIPService("web")
	f.podSlice("web", podAt("10.244.52.7", overlay, true), podAt("10.1.52.11", virtual, true))
	f.startManager(f.options())
	obj := f.registrar("overlay", classicLB, []v1beta1.Target{podTargetOf(f.ns, "web", "api", 1)})
	f.expectBackends(classicLB, "api", "10.1.52.11:8080/1")
	f.expectDegraded(obj, v1beta1.ReasonPodAddressUnreachable, "10.244.52.7 on "+overlay)
}

// OCI's health checks of a Pod target's backends show in the status as a
// node target's do: a pod whose port answers (at its loopback stand-in) is
// OK, one whose port does not is CRITICAL and named in Degraded.
func TestPodHealthInStatus(t *testing.T) {
	port := freePort(t)
	listen(t, net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port))))
	f := newFixture(t, ociemu.Options{StandIns: map[string]string{"10.1.54.11": "127.0.0.1", "10.1.54.12": "127.0.0.2"}})
	node := f.ns + "-a"
	f.node(node, "10.0.54.1")
	f.clusterIPService("web")
	f.podSliceOn("web", port, podAt("10.1.54.11", node, true), podAt("10.1.54.12", node, true))
	o := f.options()
	o.Resync = 100 * time.Millisecond // health is read on each resync
	f.startManager(o)
	obj := f.registrar("pod-health", classicLB, []v1beta1.Target{podTargetOf(f.ns, "web", "health", 1)})
	down := "10.1.54.12:" + strconv.Itoa(int(port))
	f.waitReady(obj, v1beta1.ReasonRegistered, func(cur *v1beta1.LBRegistrar, _ *metav1.Condition) error {
		if cur.Status.Healthy != "1/2" {
			return fmt.Errorf("healthy %q, want 1/2", cur.Status.Healthy)
		}
		if d := meta.FindStatusCondition(cur.Status.Conditions, v1beta1.ConditionDegraded); d == nil || d.Reason != v1beta1.ReasonBackendsUnhealthy || !strings.Contains(d.Message, down) {
			return fmt.Errorf("Degraded: %+v, want BackendsUnhealthy naming %s", d, down)
		}
		return nil
	})
}

// OCI's backend limit applies to pods as to nodes: pods that do not fit are
// withheld (Ready says so) while removals go through, and are added once
// the pods they replace are gone.
func TestPodsThatDoNotFitWaitForThoseTheyReplace(t *testing.T) {
	f := newFixture(t, ociemu.Options{WorkRequestLatency: 10 * time.Millisecond, BackendsPerBackendSet: 3})
	node := f.ns + "-a"
	f.node(node, "10.0.55.1")
	f.clusterIPService("web")
	pod := func(i int, ready bool) discoveryv1.Endpoint { return podAt(fmt.Sprintf("10.1.55.%d", i), node, ready) }
	f.podSlice("web", pod(1, true), pod(2, true), pod(3, true))
	f.startManager(f.options())
	obj := f.registrar("pods-limited", classicLB, []v1beta1.Target{podTargetOf(f.ns, "web", "api", 1)})
	f.expectBackends(classicLB, "api", "10.1.55.1:8080/1", "10.1.55.2:8080/1", "10.1.55.3:8080/1")

	// A rollout's surge: two new pods ready before the old ones go.
	f.podSlice("web", pod(1, true), pod(2, true), pod(3, true), pod(4, true), pod(5, true))
	f.eventually(20*time.Second, func() error {
		c := meta.FindStatusCondition(f.get(obj).Status.Conditions, v1beta1.ConditionReady)
		if c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "OCI refused adding 2 backends") {
			return fmt.Errorf("ready: %+v", c)
		}
		return nil
	})
	f.podSlice("web", pod(1, true), pod(2, false), pod(3, false), pod(4, true), pod(5, true))
	f.expectBackends(classicLB, "api", "10.1.55.1:8080/1", "10.1.55.4:8080/1", "10.1.55.5:8080/1")
	f.waitReady(obj, v1beta1.ReasonRegistered)
}

// serve --dry-run writes nothing, so a pod waiting for its readiness gate
// would wait forever: the gate goes True at once instead.
func TestDryRunKeepsNoRolloutWaiting(t *testing.T) {
	f := newFixture(t, ociemu.Options{})
	f.clusterIPService("web")
	o := f.options()
	o.DryRun = true
	f.startManager(o)
	f.registrar("dry", classicLB, []v1beta1.Target{podTargetOf(f.ns, "web", "api", 1)})
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "web-1",
		Labels: map[string]string{"app": "web", v1beta1.ReadinessGateLabel: ""}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "web"}},
			ReadinessGates: []corev1.PodReadinessGate{{ConditionType: v1beta1.ReadinessGate}}}}
	f.must(f.api.Create(f.ctx, pod))
	f.eventually(20*time.Second, func() error {
		f.must(k8s.Get(f.ctx, client.ObjectKeyFromObject(pod), pod))
		for _, c := range pod.Status.Conditions {
			if c.Type == v1beta1.ReadinessGate && c.Status == corev1.ConditionTrue && strings.Contains(c.Message, "--dry-run") {
				return nil
			}
		}
		return fmt.Errorf("the gate's condition: %+v", pod.Status.Conditions)
	})
}

// A backend set checked on a port only nodes answer (kube-proxy's 10256)
// would find every pod CRITICAL: before the first pod is added, the
// resource is Degraded saying so, and lbregistrar plan shows it.
func TestPodTargetsBehindANodeHealthCheckAreReported(t *testing.T) {
	f := newFixture(t, ociemu.Options{})
	f.node(f.ns+"-a", "10.0.88.1")
	f.clusterIPService("web")
	f.startManager(f.options())
	obj := f.registrar("pods", classicLB, []v1beta1.Target{podTargetOf(f.ns, "web", "proxyhealth", 1)})
	f.expectDegraded(obj, v1beta1.ReasonNoReadyEndpoints, "probes port 10256")

	planner, err := reconciler.NewPlanner(f.api, f.options(), nil)
	f.must(err)
	rp, err := planner.Plan(f.ctx, f.get(obj), nil)
	f.must(err)
	if c := meta.FindStatusCondition(rp.Conditions, v1beta1.ConditionDegraded); c == nil || !strings.Contains(c.Message, "probes port 10256") {
		t.Errorf("plan's Degraded: %+v, want the health check port named", c)
	}
}

// A backend set that preserves the client's source has OCI select its
// backends by instance, so a pod goes by its private IP's OCID, looked up
// on its node's VNICs through the Core Services API. A pod whose address
// OCI does not list is left out, with Degraded saying so and no write
// refused; when the identity may not read the private IPs, the backend
// set is held as it is.
func TestSourcePreservingBackendSetTakesPodsByPrivateIP(t *testing.T) {
	f := newFixture(t, ociemu.Options{WorkRequestLatency: 10 * time.Millisecond})
	seedPreserved(f, false)
	node := f.ns + "-a"
	instance := "ocid1.instance.oc1.iad." + f.ns
	f.must(f.emu.SeedState(ociemu.Seed{Instances: []ociemu.Instance{{ID: instance, VNICs: []ociemu.VNIC{
		{PrivateIPs: []ociemu.PrivateIP{{IPAddress: "10.0.51.1"}}},
		{PrivateIPs: []ociemu.PrivateIP{{IPAddress: "10.1.51.2"}, {ID: "ocid1.privateip.oc1.iad.pod11", IPAddress: "10.1.51.11"}, {ID: "ocid1.privateip.oc1.iad.pod12", IPAddress: "10.1.51.12"}}},
	}}}}))
	f.node(node, "10.0.51.1", func(n *corev1.Node) { n.Spec.ProviderID = "oci://" + instance })
	f.clusterIPService("web")
	f.podSlice("web", podAt("10.1.51.11", node, true), podAt("10.1.51.13", node, true))
	obj := f.registrar("by-private-ip", networkLB, []v1beta1.Target{podTargetOf(f.ns, "web", "preserved", 1)})

	// Before any write, lbregistrar plan says which pod is left out.
	planner, err := reconciler.NewPlanner(f.api, f.options(), nil)
	f.must(err)
	rp, err := planner.Plan(f.ctx, f.get(obj), nil)
	f.must(err)
	if c := meta.FindStatusCondition(rp.Conditions, v1beta1.ConditionDegraded); c == nil || c.Reason != v1beta1.ReasonPodPrivateIPNotFound || !strings.Contains(c.Message, "10.1.51.13 on "+node) {
		t.Errorf("plan's Degraded: %+v, want the pod without a private IP named", c)
	}
	if len(rp.BackendSets) != 1 || len(rp.BackendSets[0].Added) != 1 || rp.BackendSets[0].Added[0].Backend != "10.1.51.11:8080" {
		t.Errorf("plan: %+v, want only 10.1.51.11:8080 added", rp.BackendSets)
	}

	f.startManager(f.options())
	f.expectBackends(networkLB, "preserved", "10.1.51.11:8080/1", "ocid1.instance.oc1.iad.node-b:31070/1")
	f.expectTarget(networkLB, "preserved", "10.1.51.11", "ocid1.privateip.oc1.iad.pod11")
	f.expectDegraded(obj, v1beta1.ReasonPodPrivateIPNotFound, "10.1.51.13 on "+node)
	for _, c := range f.emu.Calls() {
		if c.Operation == "UpdateBackendSet" && c.Status >= 400 {
			t.Errorf("a write was refused: %+v", c)
		}
	}

	// A pod comes on a node whose instance the identity may not read (OCI
	// answers 404 NotAuthorizedOrNotFound, as for one that does not
	// exist): the backend set keeps its registered backends.
	f.node(f.ns+"-b", "10.0.51.2", func(n *corev1.Node) { n.Spec.ProviderID = "oci://ocid1.instance.oc1.iad." + f.ns + "-b" })
	writes := f.writesTo(networkLB, "preserved")
	f.podSlice("web", podAt("10.1.51.11", node, true), podAt("10.1.51.12", node, true), podAt("10.1.52.11", f.ns+"-b", true))
	f.expectDegraded(obj, v1beta1.ReasonPrivateIPsUnread, "node "+f.ns+"-b", "NotAuthorizedOrNotFound")
	f.expectBackends(networkLB, "preserved", "10.1.51.11:8080/1", "ocid1.instance.oc1.iad.node-b:31070/1")
	if n := f.writesTo(networkLB, "preserved"); n != writes {
		t.Errorf("%d writes while the private IPs were unread, want none", n-writes)
	}
}

// A Pod target adopts nothing: an EndpointSlice that lists a pod at the
// address of a backend another tool registered does not make that backend
// lbregistrar's, so it is neither reweighted nor, once the slice drops
// it, removed. Only what lbregistrar added for a pod is its own.
func TestPodTargetsAdoptNothing(t *testing.T) {
	f := newFixture(t, ociemu.Options{})
	seed, err := ociemu.LoadSeedFile("testdata/seed.yaml")
	f.must(err)
	api := seed.LoadBalancers[0].BackendSets["api"]
	api.Backends = append(api.Backends, loadbalancer.Backend{IpAddress: common.String("10.1.53.11"), Port: common.Int(8080), Weight: common.Int(7)})
	seed.LoadBalancers[0].BackendSets["api"] = api
	f.must(f.emu.SeedState(seed))
	node := f.ns + "-a"
	f.node(node, "10.0.53.1")
	f.clusterIPService("web")
	f.podSlice("web", podAt("10.1.53.11", node, true), podAt("10.1.53.12", node, true))
	f.startManager(f.options())
	obj := f.registrar("pods", classicLB, []v1beta1.Target{podTargetOf(f.ns, "web", "api", 2)})
	f.expectBackends(classicLB, "api", "10.1.53.11:8080/7", "10.1.53.12:8080/2")
	f.waitReady(obj, v1beta1.ReasonRegistered)

	f.podSlice("web", podAt("10.1.53.12", node, true), podAt("10.1.53.13", node, true))
	f.expectBackends(classicLB, "api", "10.1.53.11:8080/7", "10.1.53.12:8080/2", "10.1.53.13:8080/2")
	for _, rec := range f.get(obj).Status.BackendSets {
		if slices.ContainsFunc(rec.Owned(), func(b v1beta1.Backend) bool { return b.IP == "10.1.53.11" }) {
			t.Errorf("the other tool's backend is in the record: %+v", rec.Owned())
		}
	}
}

// On a load balancer shared by two resources and full (OCI's limit is per
// load balancer too: 512 backends in all on a classic one), planning knows
// the room left, and room freed goes first to the resource that waits for
// it: A scales up and waits; B then replaces a pod, and the slot its old
// pod frees is A's, not B's new pod's, which waits in turn. Nothing is
// written that OCI would refuse.
func TestRoomOnASharedLoadBalancerGoesToWhoWaits(t *testing.T) {
	f := newFixture(t, ociemu.Options{})
	seed, err := ociemu.LoadSeedFile("testdata/seed.yaml")
	f.must(err)
	web := seed.LoadBalancers[0].BackendSets["web"] // 1 foreign backend, and 1 in "health"
	for i := range 507 {
		web.Backends = append(web.Backends, loadbalancer.Backend{IpAddress: common.String(fmt.Sprintf("192.168.%d.%d", 10+i/250, 1+i%250)), Port: common.Int(8080), Weight: common.Int(1)})
	}
	seed.LoadBalancers[0].BackendSets["web"] = web
	f.must(f.emu.SeedState(seed)) // 509 foreign: room for 3
	node := f.ns + "-a"
	f.node(node, "10.0.54.1")
	f.clusterIPService("a")
	f.clusterIPService("b")
	f.podSlice("a", podAt("10.1.54.11", node, true))
	f.podSlice("b", podAt("10.1.54.21", node, true), podAt("10.1.54.22", node, true))
	f.startManager(f.options())
	a := f.registrar("a", classicLB, []v1beta1.Target{podTargetOf(f.ns, "a", "api", 1)})
	f.registrar("b", classicLB, []v1beta1.Target{podTargetOf(f.ns, "b", "admin", 1)})
	f.expectBackends(classicLB, "api", "10.1.54.11:8080/1")
	f.expectBackends(classicLB, "admin", "10.1.54.21:8080/1", "10.1.54.22:8080/1")

	f.podSlice("a", podAt("10.1.54.11", node, true), podAt("10.1.54.12", node, true))
	f.expectDegraded(a, v1beta1.ReasonBackendLimit)
	f.podSlice("b", podAt("10.1.54.22", node, true), podAt("10.1.54.23", node, true))
	f.expectBackends(classicLB, "api", "10.1.54.11:8080/1", "10.1.54.12:8080/1")
	f.expectBackends(classicLB, "admin", "10.1.54.22:8080/1")
	for _, c := range f.emu.Calls() {
		if c.Operation == "UpdateBackendSet" && c.Status >= 400 {
			t.Errorf("a write was refused: %+v", c)
		}
	}
}
