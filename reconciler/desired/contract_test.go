package desired

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
)

// outcome is what one backend set has after a pass: the backends written,
// or, when kept, whatever it had before (nothing was written).
type outcome struct {
	kept     bool
	backends []Backend
}

var keptAsItWas = outcome{kept: true}

func written(backends ...Backend) outcome { return outcome{backends: backends} }

// endpointOn is an endpoint on node with explicit conditions, so that a row
// means the same under every reading of the EndpointSlice conditions.
func endpointOn(node string, ready, serving, terminating bool) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{
		Addresses: []string{"10.244.0.10"},
		NodeName:  ptr.To(node),
		Conditions: discoveryv1.EndpointConditions{
			Ready: ptr.To(ready), Serving: ptr.To(serving), Terminating: ptr.To(terminating),
		},
	}
}

// The compatibility contract, cluster side: which nodes, addresses and
// ports the original operator wrote into a backend set, and what lbregistrar
// leaves there, given one converted target (see api/v1alpha1's
// TestContractTargets for the conversion). A row's ID is its row in
// docs/migration.md ("Compatibility contract"), which names the original's
// function it was read from. Endpoint rows state only what every reading of
// the EndpointSlice conditions agrees on; terminating endpoints are the
// EndpointSlice section's.
func TestContractNodesAndEndpoints(t *testing.T) {
	https := intstr.FromString("https")
	gw := func(mods ...func(*corev1.Service)) *corev1.Service {
		s := mkService("ns", "gw", corev1.ServiceTypeNodePort,
			corev1.ServicePort{Name: "https", Port: 443, NodePort: 30443},
			corev1.ServicePort{Name: "http", Port: 80, NodePort: 30080})
		for _, m := range mods {
			m(s)
		}
		return s
	}
	services := func(s *corev1.Service) map[types.NamespacedName]*corev1.Service {
		return map[types.NamespacedName]*corev1.Service{gwKey: s}
	}
	endpoints := func(eps ...discoveryv1.Endpoint) map[types.NamespacedName][]*discoveryv1.EndpointSlice {
		return map[types.NamespacedName][]*discoveryv1.EndpointSlice{gwKey: {gwSlice(eps...)}}
	}
	service := svcTarget(https, "bs", 1)
	filtered := service
	filtered.FilterByEndpoints = true
	fixed := v1beta1.Target{NodePort: 30080, BackendSetName: "bs", Weight: 1}
	a, b := mkNode("a", "10.0.0.1"), mkNode("b", "10.0.0.2")
	twoNodes := []*corev1.Node{a, b}
	onA := Backend{IP: "10.0.0.1", Port: 30443, Weight: 1}
	onB := Backend{IP: "10.0.0.2", Port: 30443, Weight: 1}

	tests := []struct {
		row     string
		targets []v1beta1.Target
		cluster Cluster
		// original is what the original operator left in the backend set.
		original outcome
		// why is set when lbregistrar differs on purpose; lbregistrar is then
		// what it leaves instead.
		why         string
		lbregistrar outcome
	}{{
		row:      "S1 a Service port by name registers its NodePort on every node",
		targets:  []v1beta1.Target{service},
		cluster:  Cluster{Nodes: twoNodes, Services: services(gw())},
		original: written(onA, onB),
	}, {
		row:      "S2 a Service port by number registers its NodePort",
		targets:  []v1beta1.Target{svcTarget(intstr.FromInt32(80), "bs", 1)},
		cluster:  Cluster{Nodes: []*corev1.Node{a}, Services: services(gw())},
		original: written(Backend{IP: "10.0.0.1", Port: 30080, Weight: 1}),
	}, {
		row:         "S3 a Service of type LoadBalancer",
		targets:     []v1beta1.Target{service},
		cluster:     Cluster{Nodes: []*corev1.Node{a}, Services: services(gw(func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeLoadBalancer }))},
		original:    keptAsItWas,
		why:         "a LoadBalancer Service has the same NodePorts; the original refused every type but NodePort",
		lbregistrar: written(onA),
	}, {
		row:      "S4 a missing Service, an unknown port or no NodePort writes nothing",
		targets:  []v1beta1.Target{svcTarget(intstr.FromString("grpc"), "bs", 1)},
		cluster:  Cluster{Nodes: []*corev1.Node{a}, Services: services(gw())},
		original: keptAsItWas,
	}, {
		row:         "S5 externalTrafficPolicy Local without filterByEndpoints",
		targets:     []v1beta1.Target{service},
		cluster:     Cluster{Nodes: twoNodes, Services: services(gw(func(s *corev1.Service) { s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal })), EndpointSlices: endpoints(endpointOn("a", true, true, false))},
		original:    written(onA, onB),
		why:         "with Local a node without an endpoint drops the traffic the load balancer sends it",
		lbregistrar: written(onA),
	}, {
		row:      "E1 filterByEndpoints registers only the nodes hosting a ready endpoint",
		targets:  []v1beta1.Target{filtered},
		cluster:  Cluster{Nodes: twoNodes, Services: services(gw()), EndpointSlices: endpoints(endpointOn("a", true, true, false))},
		original: written(onA),
	}, {
		row:      "E2 an endpoint that is not ready (and not terminating) does not count",
		targets:  []v1beta1.Target{filtered},
		cluster:  Cluster{Nodes: twoNodes, Services: services(gw()), EndpointSlices: endpoints(endpointOn("a", true, true, false), endpointOn("b", false, false, false))},
		original: written(onA),
	}, {
		row:     "E3 an endpoint on no node does not count",
		targets: []v1beta1.Target{filtered},
		cluster: Cluster{Nodes: twoNodes, Services: services(gw()), EndpointSlices: endpoints(endpointOn("a", true, true, false), func() discoveryv1.Endpoint {
			ep := endpointOn("", true, true, false)
			ep.NodeName = nil
			return ep
		}())},
		original: written(onA),
	}, {
		row:     "E5 a terminating endpoint still serving counts where its node has no ready one",
		targets: []v1beta1.Target{filtered},
		cluster: Cluster{Nodes: twoNodes, Services: services(gw()), EndpointSlices: endpoints(
			endpointOn("a", false, true, true), endpointOn("a", false, false, false), endpointOn("b", true, true, false))},
		original:    written(onB),
		why:         "kube-proxy still sends a node's traffic to a serving terminating endpoint (KEP-1669); dropping the node mid rolling update cuts its connections",
		lbregistrar: written(onA, onB),
	}, {
		row:         "E4 filterByEndpoints with no ready endpoint",
		targets:     []v1beta1.Target{filtered},
		cluster:     Cluster{Nodes: twoNodes, Services: services(gw()), EndpointSlices: endpoints(endpointOn("a", false, false, false))},
		original:    written(),
		why:         "an empty backend set is an outage, and no ready endpoint is often momentary (a rollout, a restart)",
		lbregistrar: keptAsItWas,
	}, {
		row:      "N1 a NotReady node is registered",
		targets:  []v1beta1.Target{service},
		cluster:  Cluster{Nodes: []*corev1.Node{a, mkNode("b", "10.0.0.2", notReady)}, Services: services(gw())},
		original: written(onA, onB),
	}, {
		row:      "N2 a cordoned node is registered",
		targets:  []v1beta1.Target{service},
		cluster:  Cluster{Nodes: []*corev1.Node{a, mkNode("b", "10.0.0.2", func(n *corev1.Node) { n.Spec.Unschedulable = true })}, Services: services(gw())},
		original: written(onA, onB),
	}, {
		row:         "N3 a node labelled node.kubernetes.io/exclude-from-external-load-balancers",
		targets:     []v1beta1.Target{service},
		cluster:     Cluster{Nodes: []*corev1.Node{a, mkNode("b", "10.0.0.2", excluded)}, Services: services(gw())},
		original:    written(onA, onB),
		why:         "the label is how Kubernetes says a node must not back an external load balancer",
		lbregistrar: written(onA),
	}, {
		row:         "N4 a node being deleted",
		targets:     []v1beta1.Target{service},
		cluster:     Cluster{Nodes: []*corev1.Node{a, mkNode("b", "10.0.0.2", deleting)}, Services: services(gw())},
		original:    written(onA, onB),
		why:         "it is about to disappear; deregistering it first lets the load balancer drain it",
		lbregistrar: written(onA),
	}, {
		row:         "N5 a node tainted ToBeDeletedByClusterAutoscaler",
		targets:     []v1beta1.Target{service},
		cluster:     Cluster{Nodes: []*corev1.Node{a, mkNode("b", "10.0.0.2", autoscaled)}, Services: services(gw())},
		original:    written(onA, onB),
		why:         "the autoscaler is removing it; as for a node being deleted",
		lbregistrar: written(onA),
	}, {
		row:      "N6 a node is registered by its first InternalIP",
		targets:  []v1beta1.Target{fixed},
		cluster:  Cluster{Nodes: []*corev1.Node{withAddresses(a, "ExternalIP 203.0.113.1", "InternalIP 10.0.0.1", "InternalIP 10.0.0.9")}},
		original: written(Backend{IP: "10.0.0.1", Port: 30080, Weight: 1}),
	}, {
		row:         "N7 a dual-stack node listing its IPv6 InternalIP first",
		targets:     []v1beta1.Target{fixed},
		cluster:     Cluster{Nodes: []*corev1.Node{withAddresses(a, "InternalIP fd00::1", "InternalIP 10.0.0.1")}},
		original:    written(Backend{IP: "fd00::1", Port: 30080, Weight: 1}),
		why:         "one node, one address whatever order the kubelet lists them in; IPv4 when it has one",
		lbregistrar: written(Backend{IP: "10.0.0.1", Port: 30080, Weight: 1}),
	}, {
		row:         "N8 a node without InternalIP",
		targets:     []v1beta1.Target{fixed},
		cluster:     Cluster{Nodes: []*corev1.Node{a, withAddresses(b, "ExternalIP 203.0.113.2")}},
		original:    written(Backend{IP: "", Port: 30080, Weight: 1}, Backend{IP: "10.0.0.1", Port: 30080, Weight: 1}),
		why:         "a backend without an address is not one; the node is left out and named in Degraded",
		lbregistrar: written(Backend{IP: "10.0.0.1", Port: 30080, Weight: 1}),
	}, {
		row:         "N9 no node at all",
		targets:     []v1beta1.Target{fixed},
		cluster:     Cluster{},
		original:    written(),
		why:         "an empty view is more often a cache or API blip than a cluster without nodes; emptying the set is an outage",
		lbregistrar: keptAsItWas,
	}, {
		row:         "X1 two targets of one resource share a backend set",
		targets:     []v1beta1.Target{service, svcTarget(intstr.FromString("http"), "bs", 1)},
		cluster:     Cluster{Nodes: []*corev1.Node{a}, Services: services(gw())},
		original:    written(Backend{IP: "10.0.0.1", Port: 30080, Weight: 1}),
		why:         "the original wrote each target's backends as the whole set, so the last target's replaced the others; both targets are meant",
		lbregistrar: written(Backend{IP: "10.0.0.1", Port: 30080, Weight: 1}, onA),
	}}
	for _, tt := range tests {
		t.Run(tt.row, func(t *testing.T) {
			want := tt.original
			if tt.why != "" {
				want = tt.lbregistrar
				if cmp.Equal(tt.original, tt.lbregistrar, cmp.AllowUnexported(outcome{})) {
					t.Fatal("row gives a reason to differ but does not differ")
				}
			}
			r := Compute(&v1beta1.LBRegistrarSpec{Services: tt.targets}, tt.cluster, Options{})
			if len(r.BackendSets) != 1 {
				t.Fatalf("want one backend set, got %+v", r.BackendSets)
			}
			got := outcome{kept: r.BackendSets[0].Held != nil, backends: r.BackendSets[0].Backends}
			if diff := cmp.Diff(want, got, cmp.AllowUnexported(outcome{})); diff != "" {
				t.Errorf("backend set (-want +got):\n%s", diff)
			}
		})
	}
}

// withAddresses is a copy of n with the addresses given as "Type address".
func withAddresses(n *corev1.Node, addresses ...string) *corev1.Node {
	n = n.DeepCopy()
	n.Status.Addresses = nil
	for _, a := range addresses {
		typ, addr, _ := strings.Cut(a, " ")
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeAddressType(typ), Address: addr})
	}
	return n
}
