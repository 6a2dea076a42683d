package reconciler_test

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/test/ociemu"
)

// A rolling update of the gateway on node a, as kube-proxy sees it: the old
// pod terminates but still serves while the new one is not ready yet. Node a
// stays registered throughout (kube-proxy still sends it traffic), and only
// when no pod on it serves any more is it removed; node b, whose pod is
// ready all along, keeps the backend set from being held as empty.
func TestRollingUpdateKeepsTheNodeRegistered(t *testing.T) {
	f := newFixture(t, ociemu.Options{})
	a, b := f.ns+"-a", f.ns+"-b"
	f.node(a, "10.0.19.1")
	f.node(b, "10.0.19.2")
	svc := f.service("gw", corev1.ServicePort{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)})
	port := svc.Spec.Ports[0].NodePort
	f.endpoints("gw", a, b)
	f.startManager(f.options())
	http := intstr.FromString("http")
	f.registrar("roll", classicLB, []v1beta1.Target{{Name: "gw", Namespace: f.ns, Port: &http, BackendSetName: "api", Weight: 1, FilterByEndpoints: true}})
	both := []string{fmt.Sprintf("10.0.19.1:%d/1", port), fmt.Sprintf("10.0.19.2:%d/1", port)}
	f.expectBackends(classicLB, "api", both...)
	writes := f.emu.Counters().Writes[classicLB]

	endpoint := func(node string, ready, serving, terminating bool) discoveryv1.Endpoint {
		return discoveryv1.Endpoint{NodeName: ptr.To(node), Conditions: discoveryv1.EndpointConditions{
			Ready: ptr.To(ready), Serving: ptr.To(serving), Terminating: ptr.To(terminating)}}
	}
	// reconciled waits until the controller has read the backend set again
	// since the last step, so what it decided is in the emulator.
	reads := f.reads(classicLB)
	reconciled := func() {
		t.Helper()
		f.eventually(10*time.Second, func() error {
			if n := f.reads(classicLB); n == reads {
				return fmt.Errorf("no reconcile after the EndpointSlice changed (%d reads)", n)
			}
			return nil
		})
		reads = f.reads(classicLB)
	}

	f.endpointSlice("gw", endpoint(a, false, true, true), endpoint(a, false, false, false), endpoint(b, true, true, false))
	reconciled()
	f.expectBackends(classicLB, "api", both...)
	f.endpointSlice("gw", endpoint(a, true, true, false), endpoint(b, true, true, false))
	reconciled()
	f.expectBackends(classicLB, "api", both...)
	if n := f.emu.Counters().Writes[classicLB]; n != writes {
		t.Fatalf("%d writes during the rolling update, want none", n-writes)
	}

	f.endpointSlice("gw", endpoint(a, false, false, true), endpoint(b, true, true, false))
	f.expectBackends(classicLB, "api", both[1])
}

// With externalTrafficPolicy Local, kube-proxy's health check node port
// fails on a node whose only local endpoints are terminating (KEP-1669,
// getLocalReadyEndpointIPs), so the load balancer would send it no new
// connections: the node is drained, not cut, and serves again once a ready
// endpoint returns. serving unset reads as serving, as kube-proxy reads it.
func TestLocalTrafficDrainsANodeWithOnlyTerminatingEndpoints(t *testing.T) {
	f := newFixture(t, ociemu.Options{})
	a, b := f.ns+"-a", f.ns+"-b"
	f.node(a, "10.0.21.1")
	f.node(b, "10.0.21.2")
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "gw"}, Spec: corev1.ServiceSpec{
		Type: corev1.ServiceTypeNodePort, ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal, Selector: map[string]string{"app": "gw"},
		Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}}}}
	f.must(f.api.Create(f.ctx, svc))
	port := svc.Spec.Ports[0].NodePort
	f.endpoints("gw", a, b)
	o := f.options()
	o.NodeDrainPeriod = time.Hour
	f.startManager(o)
	http := intstr.FromString("http")
	f.registrar("local", classicLB, []v1beta1.Target{{Name: "gw", Namespace: f.ns, Port: &http, BackendSetName: "api", Weight: 1}})
	onA, onB := fmt.Sprintf("10.0.21.1:%d/1", port), fmt.Sprintf("10.0.21.2:%d/1", port)
	f.expectBackends(classicLB, "api", onA, onB)

	terminating := discoveryv1.Endpoint{NodeName: ptr.To(a), Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(false), Terminating: ptr.To(true)}}
	ready := func(node string) discoveryv1.Endpoint {
		return discoveryv1.Endpoint{NodeName: ptr.To(node), Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}
	}
	f.endpointSlice("gw", terminating, ready(b))
	f.expectBackends(classicLB, "api", onA+",drain", onB)
	f.endpointSlice("gw", terminating, ready(a), ready(b))
	f.expectBackends(classicLB, "api", onA, onB)
}

// reads counts the GetBackendSet calls the emulator answered for lb.
func (f *fixture) reads(lb string) int {
	n := 0
	for _, c := range f.emu.Calls() {
		if c.Operation == "GetBackendSet" && c.LoadBalancerID == lb {
			n++
		}
	}
	return n
}
