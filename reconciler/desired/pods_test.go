package desired

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
)

// podTarget is a Pod target of the Service gwKey.
func podTarget(port intstr.IntOrString, set string, weight int32) v1beta1.Target {
	t := svcTarget(port, set, weight)
	t.TargetType = v1beta1.TargetTypePod
	return t
}

// pod is an endpoint of a pod of namespace ns at ip on node, ready unless
// ready says.
func pod(ip, node string, ready ...bool) discoveryv1.Endpoint {
	ep := discoveryv1.Endpoint{Addresses: []string{ip}, NodeName: ptr.To(node),
		TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: "pod-" + ip}}
	if len(ready) > 0 {
		ep.Conditions.Ready = ptr.To(ready[0])
	}
	return ep
}

// terminating is a pod being deleted, still serving, as the EndpointSlice
// controller shows it (Kubernetes 1.26 on).
func terminating(ip, node string) discoveryv1.Endpoint {
	ep := pod(ip, node, false)
	ep.Conditions.Serving, ep.Conditions.Terminating = ptr.To(true), ptr.To(true)
	return ep
}

func providerID(id string) nodeOpt {
	return func(n *corev1.Node) { n.Spec.ProviderID = "oci://" + id }
}

func podCIDR(cidr string) nodeOpt {
	return func(n *corev1.Node) { n.Spec.PodCIDR, n.Spec.PodCIDRs = cidr, []string{cidr} }
}

func byName(nodes ...*corev1.Node) map[string]*corev1.Node {
	m := map[string]*corev1.Node{}
	for _, n := range nodes {
		m[n.Name] = n
	}
	return m
}

func TestComputePodTargets(t *testing.T) {
	// A ClusterIP Service: pods are reached without a node port.
	gw := mkService("ns", "gw", corev1.ServiceTypeClusterIP,
		corev1.ServicePort{Name: "https", Port: 443, TargetPort: intstr.FromString("https")},
		corev1.ServicePort{Name: "http", Port: 80},
		corev1.ServicePort{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP})
	services := map[types.NamespacedName]*corev1.Service{gwKey: gw}
	slicesOf := func(s ...*discoveryv1.EndpointSlice) map[types.NamespacedName][]*discoveryv1.EndpointSlice {
		return map[types.NamespacedName][]*discoveryv1.EndpointSlice{gwKey: s}
	}
	// OKE: nodes with instances, their pods' addresses private IPs of them.
	okeNodes := byName(mkNode("a", "10.0.0.1", providerID("ocid1.instance.oc1.iad.a")), mkNode("b", "10.0.0.2", providerID("ocid1.instance.oc1.iad.b")))
	podIPs := map[netip.Addr]string{netip.MustParseAddr("10.1.0.11"): "ocid1.privateip.oc1.iad.pod11", netip.MustParseAddr("10.1.0.12"): "ocid1.privateip.oc1.iad.pod12"}
	// flannel: each node's pods in its podCIDR, which the VCN does not route.
	overlayNodes := byName(mkNode("a", "10.0.0.1", podCIDR("10.244.0.0/24")), mkNode("b", "10.0.0.2", podCIDR("10.244.1.0/24")))

	runComputeCases(t, []computeCase{
		{
			name: "ready endpoints by address and the slice's port; not ready and terminating ones are not",
			spec: v1beta1.LBRegistrarSpec{Services: []v1beta1.Target{podTarget(intstr.FromString("https"), "bs", 3)}},
			cluster: Cluster{Services: services, EndpointSlices: slicesOf(gwSlice(
				pod("10.1.0.12", "a"), pod("10.1.0.11", "a", true), pod("10.1.0.13", "b", false), terminating("10.1.0.14", "b")))},
			want: []BackendSet{{Name: "bs", Backends: []Backend{{"10.1.0.11", 8443, 3, ""}, {"10.1.0.12", 8443, 3, ""}}}},
		},
		{
			name: "each slice gives its pods' port: a named targetPort resolved per pod",
			spec: v1beta1.LBRegistrarSpec{Services: []v1beta1.Target{podTarget(intstr.FromInt32(443), "bs", 1)}},
			cluster: Cluster{Services: services, EndpointSlices: slicesOf(
				gwSlice(pod("10.1.0.11", "a")),
				withPorts(gwSlice(pod("10.1.0.21", "b")), discoveryv1.EndpointPort{Name: ptr.To("https"), Port: ptr.To[int32](9443)}),
				// A slice without the port: its pods do not serve it.
				withPorts(gwSlice(pod("10.1.0.31", "b")), discoveryv1.EndpointPort{Name: ptr.To("http"), Port: ptr.To[int32](8080)}),
				// One endpoint in two slices, as the controller may briefly have it.
				gwSlice(pod("10.1.0.11", "a")),
			)},
			want: []BackendSet{{Name: "bs", Backends: []Backend{{"10.1.0.11", 8443, 1, ""}, {"10.1.0.21", 9443, 1, ""}}}},
		},
		{
			name: "a UDP listener's backend set takes the UDP port's endpoints",
			spec: v1beta1.LBRegistrarSpec{Services: []v1beta1.Target{podTarget(intstr.FromString("dns"), "bs", 1)}},
			cluster: Cluster{Services: services, EndpointSlices: slicesOf(withPorts(gwSlice(pod("10.1.0.11", "a")),
				discoveryv1.EndpointPort{Name: ptr.To("dns"), Port: ptr.To[int32](5353), Protocol: ptr.To(corev1.ProtocolUDP)}))},
			opts: Options{BackendSets: map[string]Takes{"bs": {Protocols: []corev1.Protocol{corev1.ProtocolUDP}}}},
			want: []BackendSet{{Name: "bs", Backends: []Backend{{"10.1.0.11", 5353, 1, ""}}}},
		},
		{
			name: "an IPv6 backend set takes the IPv6 slices' endpoints, in canonical form",
			spec: v1beta1.LBRegistrarSpec{Services: []v1beta1.Target{podTarget(intstr.FromString("https"), "v6", 1), podTarget(intstr.FromString("https"), "v4", 1)}},
			cluster: Cluster{Services: services, EndpointSlices: slicesOf(
				gwSlice(pod("10.1.0.11", "a")),
				withPorts(sliceOf("ns", "gw", discoveryv1.AddressTypeIPv6, pod("FD00:0::11", "a")), gwSlice().Ports...))},
			opts: Options{BackendSets: map[string]Takes{"v6": {Family: IPv6}}},
			want: []BackendSet{
				{Name: "v4", Backends: []Backend{{"10.1.0.11", 8443, 1, ""}}},
				{Name: "v6", Backends: []Backend{{"fd00::11", 8443, 1, ""}}},
			},
		},
		{
			name:       "no ready endpoint holds the backend set",
			spec:       v1beta1.LBRegistrarSpec{Services: []v1beta1.Target{podTarget(intstr.FromString("https"), "bs", 1)}},
			cluster:    Cluster{Services: services, EndpointSlices: slicesOf(gwSlice(terminating("10.1.0.11", "a")))},
			want:       []BackendSet{{Name: "bs", Held: &Issue{Reason: v1beta1.ReasonNoReadyEndpoints}}},
			wantIssues: []string{v1beta1.ReasonNoReadyEndpoints},
		},
		{
			name:       "a missing Service holds the backend set",
			spec:       v1beta1.LBRegistrarSpec{Services: []v1beta1.Target{podTarget(intstr.FromString("https"), "bs", 1)}},
			cluster:    Cluster{},
			want:       []BackendSet{{Name: "bs", Held: &Issue{Reason: v1beta1.ReasonServiceNotFound}}},
			wantIssues: []string{v1beta1.ReasonServiceNotFound},
		},
		{
			name: "an ExternalName Service has no endpoints",
			spec: v1beta1.LBRegistrarSpec{Services: []v1beta1.Target{podTarget(intstr.FromString("https"), "bs", 1)}},
			cluster: Cluster{Services: map[types.NamespacedName]*corev1.Service{gwKey: mkService("ns", "gw", corev1.ServiceTypeExternalName,
				corev1.ServicePort{Name: "https", Port: 443})}},
			want:       []BackendSet{{Name: "bs", Held: &Issue{Reason: v1beta1.ReasonServiceTypeUnsupported}}},
			wantIssues: []string{v1beta1.ReasonServiceTypeUnsupported},
		},
		{
			name: "overlay addresses (in the node's podCIDR) are not registered; host-network pods and nodes without a pod range are",
			spec: v1beta1.LBRegistrarSpec{Services: []v1beta1.Target{podTarget(intstr.FromString("https"), "bs", 1)}},
			cluster: Cluster{Services: services, NodesByName: byName(
				mkNode("a", "10.0.0.1", podCIDR("10.244.0.0/24")), mkNode("virtual", "10.0.0.9")),
				EndpointSlices: slicesOf(gwSlice(pod("10.244.0.5", "a"), pod("10.0.0.1", "a"), pod("10.1.0.40", "virtual"), pod("10.1.0.41", "unknown")))},
			want:       []BackendSet{{Name: "bs", Backends: []Backend{{"10.0.0.1", 8443, 1, ""}, {"10.1.0.40", 8443, 1, ""}, {"10.1.0.41", 8443, 1, ""}}}},
			wantIssues: []string{v1beta1.ReasonPodAddressUnreachable},
		},
		{
			name: "only overlay addresses: the backend set is held",
			spec: v1beta1.LBRegistrarSpec{Services: []v1beta1.Target{podTarget(intstr.FromString("https"), "bs", 1)}},
			cluster: Cluster{Services: services, NodesByName: overlayNodes,
				EndpointSlices: slicesOf(gwSlice(pod("10.244.0.5", "a"), pod("10.244.1.7", "b")))},
			want:       []BackendSet{{Name: "bs", Held: &Issue{Reason: v1beta1.ReasonNoReadyEndpoints}}},
			wantIssues: []string{v1beta1.ReasonPodAddressUnreachable, v1beta1.ReasonNoReadyEndpoints},
		},
		{
			name: "a Service port's node port and endpoints in one backend set, each with its weight",
			spec: v1beta1.LBRegistrarSpec{Services: []v1beta1.Target{
				svcTarget(intstr.FromString("https"), "bs", 90), podTarget(intstr.FromString("https"), "bs", 10)}},
			cluster: Cluster{
				Nodes: []*corev1.Node{mkNode("a", "10.0.0.1")},
				Services: map[types.NamespacedName]*corev1.Service{gwKey: mkService("ns", "gw", corev1.ServiceTypeNodePort,
					corev1.ServicePort{Name: "https", Port: 443, NodePort: 30443})},
				EndpointSlices: slicesOf(gwSlice(pod("10.1.0.11", "a"))),
			},
			want: []BackendSet{{Name: "bs", Backends: []Backend{{"10.0.0.1", 30443, 90, ""}, {"10.1.0.11", 8443, 10, ""}}}},
		},
		{
			name:    "pods only: no node is needed, and none is reported missing",
			spec:    v1beta1.LBRegistrarSpec{Services: []v1beta1.Target{podTarget(intstr.FromString("https"), "bs", 1)}},
			cluster: Cluster{Services: services, EndpointSlices: slicesOf(gwSlice(pod("10.1.0.11", "gone")))},
			opts:    Options{RequireReady: true},
			want:    []BackendSet{{Name: "bs", Backends: []Backend{{"10.1.0.11", 8443, 1, ""}}}},
		},
		{
			name: "a source-preserving backend set takes pods by their private IP's OCID; one OCI does not list is left out",
			spec: v1beta1.LBRegistrarSpec{Services: []v1beta1.Target{podTarget(intstr.FromString("https"), "bs", 1)}},
			cluster: Cluster{Services: services, NodesByName: okeNodes,
				EndpointSlices: slicesOf(gwSlice(pod("10.1.0.11", "a"), pod("10.1.0.12", "b"), pod("10.1.0.13", "a"))),
				PrivateIPs:     PrivateIPs{OCIDs: podIPs}},
			opts: Options{BackendSets: map[string]Takes{"bs": {Instance: true}}},
			want: []BackendSet{{Name: "bs", Backends: []Backend{
				{"10.1.0.11", 8443, 1, "ocid1.privateip.oc1.iad.pod11"}, {"10.1.0.12", 8443, 1, "ocid1.privateip.oc1.iad.pod12"}}}},
			wantIssues: []string{v1beta1.ReasonPodPrivateIPNotFound},
		},
		{
			name: "a pod on a node without an instance OCID has no private IP to find",
			spec: v1beta1.LBRegistrarSpec{Services: []v1beta1.Target{podTarget(intstr.FromString("https"), "bs", 1)}},
			cluster: Cluster{Services: services, NodesByName: byName(mkNode("a", "10.0.0.1")),
				EndpointSlices: slicesOf(gwSlice(pod("10.1.0.11", "a")))},
			opts:       Options{BackendSets: map[string]Takes{"bs": {Instance: true}}},
			want:       []BackendSet{{Name: "bs", Held: &Issue{Reason: v1beta1.ReasonNoReadyEndpoints}}},
			wantIssues: []string{v1beta1.ReasonPodPrivateIPNotFound, v1beta1.ReasonNoReadyEndpoints},
		},
		{
			name: "a node's private IPs unread: the set is held, its pods' OCIDs in doubt",
			spec: v1beta1.LBRegistrarSpec{Services: []v1beta1.Target{podTarget(intstr.FromString("https"), "bs", 1)}},
			cluster: Cluster{Services: services, NodesByName: okeNodes,
				EndpointSlices: slicesOf(gwSlice(pod("10.1.0.11", "a"), pod("10.1.0.12", "b"))),
				PrivateIPs:     PrivateIPs{OCIDs: podIPs, Unread: map[string]string{"b": "ListPrivateIps: 404 NotAuthorizedOrNotFound"}}},
			opts:       Options{BackendSets: map[string]Takes{"bs": {Instance: true}}},
			want:       []BackendSet{{Name: "bs", Held: &Issue{Reason: v1beta1.ReasonPrivateIPsUnread}}},
			wantIssues: []string{v1beta1.ReasonPrivateIPsUnread},
		},
		{
			name:    "an IPv6 source-preserving backend set takes pods by address, as nodes",
			spec:    v1beta1.LBRegistrarSpec{Services: []v1beta1.Target{podTarget(intstr.FromString("https"), "bs", 1)}},
			cluster: Cluster{Services: services, NodesByName: okeNodes, EndpointSlices: slicesOf(withPorts(sliceOf("ns", "gw", discoveryv1.AddressTypeIPv6, pod("fd00::11", "a")), gwSlice().Ports...))},
			opts:    Options{BackendSets: map[string]Takes{"bs": {Family: IPv6, Instance: true}}},
			want:    []BackendSet{{Name: "bs", Backends: []Backend{{"fd00::11", 8443, 1, ""}}}},
		},
	})
}

// PrivateIPNodes names the nodes of the endpoints of Pod targets whose
// backend sets take pods by private IP, with their endpoints' addresses.
func TestPrivateIPNodes(t *testing.T) {
	gw := mkService("ns", "gw", corev1.ServiceTypeClusterIP, corev1.ServicePort{Name: "https", Port: 443})
	c := Cluster{Services: map[types.NamespacedName]*corev1.Service{gwKey: gw},
		EndpointSlices: map[types.NamespacedName][]*discoveryv1.EndpointSlice{gwKey: {
			gwSlice(pod("10.1.0.12", "a"), pod("10.1.0.11", "a", false), pod("10.1.0.21", "b")), gwSlice(pod("10.1.0.12", "a"))}}}
	spec := v1beta1.LBRegistrarSpec{Services: []v1beta1.Target{podTarget(intstr.FromString("https"), "bs", 1), svcTarget(intstr.FromString("https"), "nodes", 1)}}
	got := PrivateIPNodes(&spec, c, map[string]Takes{"bs": {Instance: true}, "nodes": {Instance: true}})
	want := map[string][]netip.Addr{"a": {netip.MustParseAddr("10.1.0.11"), netip.MustParseAddr("10.1.0.12")}, "b": {netip.MustParseAddr("10.1.0.21")}}
	if d := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); d != "" {
		t.Errorf("nodes (-want +got):\n%s", d)
	}
	if got := PrivateIPNodes(&spec, c, map[string]Takes{"bs": {}}); got != nil {
		t.Errorf("a backend set that takes addresses needs no private IPs, got %v", got)
	}
}

// A Pod target whose Service the EndpointSlice controller publishes with
// no endpoint (its placeholder slice: its pods scaled to zero or deleted)
// wants no backend, so its pods' backends leave; wherever the view is in
// doubt the backend set is held: no slice at all, another manager's empty
// slice, endpoints that exist but none ready, only terminating ones, or
// another target of the set resolving to no node.
func TestPodTargetOfAServiceWithNoEndpoints(t *testing.T) {
	gw := mkService("ns", "gw", corev1.ServiceTypeNodePort, corev1.ServicePort{Name: "https", Port: 443, NodePort: 30443})
	placeholder := func(managedBy string) *discoveryv1.EndpointSlice {
		s := sliceOf("ns", "gw", discoveryv1.AddressTypeIPv4)
		s.Ports, s.Endpoints = []discoveryv1.EndpointPort{}, []discoveryv1.Endpoint{}
		s.Labels[discoveryv1.LabelManagedBy] = managedBy
		return s
	}
	https := intstr.FromString("https")
	for _, tt := range []struct {
		name    string
		targets []v1beta1.Target
		slices  []*discoveryv1.EndpointSlice
		held    string // the hold's reason; "" for an empty backend set wanted
	}{
		{"the controller's placeholder: emptied", []v1beta1.Target{podTarget(https, "bs", 1)}, []*discoveryv1.EndpointSlice{placeholder(endpointSliceController)}, ""},
		{"no slice at all", []v1beta1.Target{podTarget(https, "bs", 1)}, nil, v1beta1.ReasonNoReadyEndpoints},
		{"another manager's empty slice", []v1beta1.Target{podTarget(https, "bs", 1)}, []*discoveryv1.EndpointSlice{placeholder("someone-else")}, v1beta1.ReasonNoReadyEndpoints},
		{"endpoints, none ready", []v1beta1.Target{podTarget(https, "bs", 1)}, []*discoveryv1.EndpointSlice{placeholder(endpointSliceController), gwSlice(pod("10.1.0.1", "a", false))}, v1beta1.ReasonNoReadyEndpoints},
		{"only terminating endpoints", []v1beta1.Target{podTarget(https, "bs", 1)}, []*discoveryv1.EndpointSlice{gwSlice(terminating("10.1.0.1", "a"))}, v1beta1.ReasonNoReadyEndpoints},
		{"a node target of the set with no node", []v1beta1.Target{podTarget(https, "bs", 1), {NodePort: 30080, BackendSetName: "bs", Weight: 1}}, []*discoveryv1.EndpointSlice{placeholder(endpointSliceController)}, v1beta1.ReasonNoEligibleNodes},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := Cluster{Services: map[types.NamespacedName]*corev1.Service{gwKey: gw}, EndpointSlices: map[types.NamespacedName][]*discoveryv1.EndpointSlice{gwKey: tt.slices}}
			r := Compute(&v1beta1.LBRegistrarSpec{Services: tt.targets}, c, Options{})
			bs := r.BackendSets[0]
			switch {
			case tt.held == "" && (bs.Held != nil || bs.Backends != nil):
				t.Errorf("held %+v, backends %v; want an empty backend set", bs.Held, bs.Backends)
			case tt.held == "" && !hasIssue(r.Issues, v1beta1.ReasonEndpointsGone):
				t.Errorf("issues %+v, want %s", r.Issues, v1beta1.ReasonEndpointsGone)
			case tt.held != "" && (bs.Held == nil || bs.Held.Reason != tt.held):
				t.Errorf("held %+v, want %s", bs.Held, tt.held)
			}
		})
	}
}

func hasIssue(issues []Issue, reason string) bool {
	for _, is := range issues {
		if is.Reason == reason {
			return true
		}
	}
	return false
}

// A backend set whose health checker probes a port only nodes answer
// (kube-proxy's healthz, a health check node port, a node port) finds
// every pod CRITICAL: a set with Pod targets says so before the first pod
// is added. Each backend's own port, or a port pods answer, is fine, and
// so is any port for node targets alone.
func TestPodTargetsBehindANodeHealthCheck(t *testing.T) {
	gw := mkService("ns", "gw", corev1.ServiceTypeLoadBalancer, corev1.ServicePort{Name: "https", Port: 443, NodePort: 30443})
	gw.Spec.HealthCheckNodePort = 31999
	https := intstr.FromString("https")
	for _, tt := range []struct {
		name   string
		target v1beta1.Target
		port   int32
		want   bool
	}{
		{"kube-proxy's healthz", podTarget(https, "bs", 1), 10256, true},
		{"the Service's health check node port", podTarget(https, "bs", 1), 31999, true},
		{"the Service's node port", podTarget(https, "bs", 1), 30443, true},
		{"each backend's own port", podTarget(https, "bs", 1), 0, false},
		{"a port the pods answer", podTarget(https, "bs", 1), 15021, false},
		{"node targets alone", svcTarget(https, "bs", 1), 10256, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := Cluster{Nodes: []*corev1.Node{mkNode("a", "10.0.0.1")}, Services: map[types.NamespacedName]*corev1.Service{gwKey: gw},
				EndpointSlices: map[types.NamespacedName][]*discoveryv1.EndpointSlice{gwKey: {gwSlice()}}}
			r := Compute(&v1beta1.LBRegistrarSpec{Services: []v1beta1.Target{tt.target}}, c, Options{BackendSets: map[string]Takes{"bs": {HealthPort: tt.port}}})
			if got := hasIssue(r.Issues, v1beta1.ReasonHealthCheckNodePort); got != tt.want {
				t.Errorf("issues %+v; want %s: %t", r.Issues, v1beta1.ReasonHealthCheckNodePort, tt.want)
			}
		})
	}
}

// A Pod target registers only endpoints that name a pod of the Service's
// namespace: one that names no pod, or another namespace's, is left out
// and reported, as another hand may have written its slice.
func TestPodTargetsRegisterOnlyTheServicesPods(t *testing.T) {
	gw := mkService("ns", "gw", corev1.ServiceTypeClusterIP, corev1.ServicePort{Name: "https", Port: 443})
	noPod := discoveryv1.Endpoint{Addresses: []string{"10.9.0.1"}, NodeName: ptr.To("a")}
	otherNamespace := pod("10.9.0.2", "a")
	otherNamespace.TargetRef.Namespace = "other"
	notAPod := pod("10.9.0.3", "a")
	notAPod.TargetRef.Kind = "Node"
	c := Cluster{Services: map[types.NamespacedName]*corev1.Service{gwKey: gw},
		EndpointSlices: map[types.NamespacedName][]*discoveryv1.EndpointSlice{gwKey: {gwSlice(pod("10.1.0.1", "a"), noPod, otherNamespace, notAPod)}}}
	r := Compute(&v1beta1.LBRegistrarSpec{Services: []v1beta1.Target{podTarget(intstr.FromString("https"), "bs", 1)}}, c, Options{})
	if bs := r.BackendSets[0]; len(bs.Backends) != 1 || bs.Backends[0].IP != "10.1.0.1" {
		t.Errorf("backends %+v, want the Service's own pod alone", bs.Backends)
	}
	if !hasIssue(r.Issues, v1beta1.ReasonEndpointNotAPod) {
		t.Errorf("issues %+v, want %s", r.Issues, v1beta1.ReasonEndpointNotAPod)
	}
}

// The backends only Pod targets want are named, so that the plan never
// adopts one it finds registered; one a node target wants too is not.
func TestPodBackendsAreNamed(t *testing.T) {
	gw := mkService("ns", "gw", corev1.ServiceTypeNodePort, corev1.ServicePort{Name: "https", Port: 443, NodePort: 30443})
	c := Cluster{Nodes: []*corev1.Node{mkNode("a", "10.0.0.1")}, Services: map[types.NamespacedName]*corev1.Service{gwKey: gw},
		EndpointSlices: map[types.NamespacedName][]*discoveryv1.EndpointSlice{gwKey: {gwSlice(pod("10.1.0.11", "a"), pod("10.1.0.12", "a"))}}}
	https := intstr.FromString("https")
	nodes := svcTarget(https, "bs", 1)
	spec := v1beta1.LBRegistrarSpec{Services: []v1beta1.Target{podTarget(https, "bs", 1), nodes}}
	got := Compute(&spec, c, Options{}).BackendSets[0].PodBackends
	if d := cmp.Diff(map[string]bool{"10.1.0.11:8443": true, "10.1.0.12:8443": true}, got); d != "" {
		t.Errorf("pod backends (-want +got):\n%s", d)
	}
	spec.Services = []v1beta1.Target{nodes}
	if got := Compute(&spec, c, Options{}).BackendSets[0].PodBackends; got != nil {
		t.Errorf("node targets alone: pod backends %v", got)
	}
}
