package desired

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
)

type nodeOpt func(*corev1.Node)

func mkNode(name, ip string, opts ...nodeOpt) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
	if ip != "" {
		n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}}
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	for _, o := range opts {
		o(n)
	}
	return n
}

func notReady(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionFalse }
func excluded(n *corev1.Node) { n.Labels[corev1.LabelNodeExcludeBalancers] = "" }
func deleting(n *corev1.Node) { n.DeletionTimestamp = &metav1.Time{} }
func autoscaled(n *corev1.Node) {
	n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: TaintToBeDeletedByClusterAutoscaler, Effect: corev1.TaintEffectNoSchedule})
}
func tainted(key, value string) nodeOpt {
	return func(n *corev1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: key, Value: value, Effect: corev1.TaintEffectNoSchedule})
	}
}

// readyCondition sets the Ready condition as the kubelet or the node
// lifecycle controller writes it.
func readyCondition(status corev1.ConditionStatus, reason, message string) nodeOpt {
	return func(n *corev1.Node) {
		n.Status.Conditions[0] = corev1.NodeCondition{Type: corev1.NodeReady, Status: status, Reason: reason, Message: message}
	}
}

// shuttingDown is Ready as the kubelet writes it during a graceful node
// shutdown, joined with another error as nodestatus.ReadyCondition joins them.
var shuttingDown = readyCondition(corev1.ConditionFalse, "KubeletNotReady", "[container runtime status check may not have completed yet, node is shutting down]")

func withAddress(ip string) nodeOpt {
	return func(n *corev1.Node) {
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip})
	}
}
func label(k, v string) nodeOpt { return func(n *corev1.Node) { n.Labels[k] = v } }

func withFamilies(s *corev1.Service, families ...corev1.IPFamily) *corev1.Service {
	s.Spec.IPFamilies = families
	return s
}

func mkService(ns, name string, typ corev1.ServiceType, ports ...corev1.ServicePort) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.ServiceSpec{Type: typ, Ports: ports}}
}

// sliceOf is an EndpointSlice of addressType of the Service ns/name.
func sliceOf(ns, name string, addressType discoveryv1.AddressType, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Labels: map[string]string{discoveryv1.LabelServiceName: name}},
		AddressType: addressType, Endpoints: eps,
	}
}

// gwSlice is an IPv4 EndpointSlice of the Service gwKey, serving its ports
// https and http.
func gwSlice(eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	s := sliceOf(gwKey.Namespace, gwKey.Name, discoveryv1.AddressTypeIPv4, eps...)
	s.Ports = []discoveryv1.EndpointPort{
		{Name: ptr.To("https"), Port: ptr.To[int32](8443), Protocol: ptr.To(corev1.ProtocolTCP)},
		{Name: ptr.To("http"), Port: ptr.To[int32](8080)}, // protocol unset: TCP
	}
	return s
}

// withPorts is s serving ports instead of its own.
func withPorts(s *discoveryv1.EndpointSlice, ports ...discoveryv1.EndpointPort) *discoveryv1.EndpointSlice {
	s.Ports = ports
	return s
}

func slice(nodesReady map[string]*bool) *discoveryv1.EndpointSlice {
	s := gwSlice()
	for n, r := range nodesReady {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{NodeName: ptr.To(n), Conditions: discoveryv1.EndpointConditions{Ready: r}})
	}
	return s
}

func svcTarget(port intstr.IntOrString, set string, weight int32) v1beta1.Target {
	return v1beta1.Target{Name: "gw", Namespace: "ns", Port: &port, BackendSetName: set, Weight: weight}
}

var gwKey = types.NamespacedName{Namespace: "ns", Name: "gw"}

func TestCompute(t *testing.T) {
	gw := mkService("ns", "gw", corev1.ServiceTypeLoadBalancer,
		corev1.ServicePort{Name: "https", Port: 443, NodePort: 30443},
		corev1.ServicePort{Name: "http", Port: 80, NodePort: 30080})
	threeNodes := []*corev1.Node{mkNode("a", "10.0.0.1"), mkNode("b", "10.0.0.2"), mkNode("c", "10.0.0.3")}

	runComputeCases(t, []computeCase{
		{
			name:    "service port by name on every node",
			spec:    v1beta1.LBRegistrarSpec{Services: []v1beta1.Target{svcTarget(intstr.FromString("https"), "bs", 2)}},
			cluster: Cluster{Nodes: threeNodes, Services: map[types.NamespacedName]*corev1.Service{gwKey: gw}},
			want: []BackendSet{{Name: "bs", Backends: []Backend{
				{"10.0.0.1", 30443, 2, ""}, {"10.0.0.2", 30443, 2, ""}, {"10.0.0.3", 30443, 2, ""}}}},
		},
		{
			name:    "service port by number",
			spec:    v1beta1.LBRegistrarSpec{Services: []v1beta1.Target{svcTarget(intstr.FromInt32(80), "bs", 1)}},
			cluster: Cluster{Nodes: threeNodes[:1], Services: map[types.NamespacedName]*corev1.Service{gwKey: gw}},
			want:    []BackendSet{{Name: "bs", Backends: []Backend{{"10.0.0.1", 30080, 1, ""}}}},
		},
		{
			name: "fixed node port",
			spec: v1beta1.LBRegistrarSpec{Services: []v1beta1.Target{{NodePort: 31000, BackendSetName: "bs", Weight: 1}}},
			cluster: Cluster{Nodes: []*corev1.Node{
				mkNode("a", "10.0.0.1"), mkNode("x", "10.0.0.9", excluded), mkNode("d", "10.0.0.8", deleting),
				mkNode("s", "10.0.0.7", autoscaled), mkNode("nr", "10.0.0.6", notReady)}},
			want: []BackendSet{{Name: "bs", Backends: []Backend{{"10.0.0.1", 31000, 1, ""}, {"10.0.0.6", 31000, 1, ""}}}},
		},
		{
			name: "require ready filters not ready nodes",
			spec: v1beta1.LBRegistrarSpec{Services: []v1beta1.Target{{NodePort: 31000, BackendSetName: "bs", Weight: 1}}},
			cluster: Cluster{Nodes: []*corev1.Node{
				mkNode("a", "10.0.0.1"), mkNode("nr", "10.0.0.6", notReady)}},
			opts: Options{RequireReady: true},
			want: []BackendSet{{Name: "bs", Backends: []Backend{{"10.0.0.1", 31000, 1, ""}}}},
		},
		{
			name: "require ready fails open when no node is ready",
			spec: v1beta1.LBRegistrarSpec{Services: []v1beta1.Target{{NodePort: 31000, BackendSetName: "bs", Weight: 1}}},
			cluster: Cluster{Nodes: []*corev1.Node{
				mkNode("a", "10.0.0.1", notReady), mkNode("b", "10.0.0.2", notReady)}},
			opts:       Options{RequireReady: true},
			want:       []BackendSet{{Name: "bs", Backends: []Backend{{"10.0.0.1", 31000, 1, ""}, {"10.0.0.2", 31000, 1, ""}}}},
			wantIssues: []string{v1beta1.ReasonNoReadyNodes},
		},
		{
			name: "node selector",
			spec: v1beta1.LBRegistrarSpec{
				NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"pool": "edge"}},
				Services:     []v1beta1.Target{{NodePort: 31000, BackendSetName: "bs", Weight: 1}},
			},
			cluster: Cluster{Nodes: []*corev1.Node{mkNode("a", "10.0.0.1", label("pool", "edge")), mkNode("b", "10.0.0.2")}},
			want:    []BackendSet{{Name: "bs", Backends: []Backend{{"10.0.0.1", 31000, 1, ""}}}},
		},
		{
			name: "node without internal ip is skipped and reported",
			spec: v1beta1.LBRegistrarSpec{Services: []v1beta1.Target{{NodePort: 31000, BackendSetName: "bs", Weight: 1}}},
			cluster: Cluster{Nodes: []*corev1.Node{mkNode("a", "10.0.0.1"), mkNode("b", "", func(n *corev1.Node) {
				n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeExternalIP, Address: "1.2.3.4"}}
			})}},
			want:       []BackendSet{{Name: "bs", Backends: []Backend{{"10.0.0.1", 31000, 1, ""}}}},
			wantIssues: []string{v1beta1.ReasonNodeWithoutAddress},
		},
		{
			// OCI's classic load balancer has no IPv6 backends.
			name: "a classic backend set takes IPv4 addresses only; an IPv6-only node is reported",
			spec: v1beta1.LBRegistrarSpec{Services: []v1beta1.Target{{NodePort: 31000, BackendSetName: "bs", Weight: 1}}},
			cluster: Cluster{Nodes: []*corev1.Node{
				mkNode("a", "", func(n *corev1.Node) {
					n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "fd00::1"}, {Type: corev1.NodeInternalIP, Address: "10.0.0.1"}}
				}),
				mkNode("b", "fd00::2"),
			}},
			want:       []BackendSet{{Name: "bs", Backends: []Backend{{"10.0.0.1", 31000, 1, ""}}}},
			wantIssues: []string{v1beta1.ReasonNodeWithoutAddress},
		},
		{
			name: "a backend set takes the addresses of its family, in canonical form; nodes without one are reported",
			spec: v1beta1.LBRegistrarSpec{Services: []v1beta1.Target{
				{NodePort: 31000, BackendSetName: "v4", Weight: 1}, {NodePort: 31000, BackendSetName: "v6", Weight: 1}}},
			cluster: Cluster{Nodes: []*corev1.Node{
				mkNode("dual", "", func(n *corev1.Node) {
					n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "fd00:0:0::0001"}, {Type: corev1.NodeInternalIP, Address: "10.0.0.1"}}
				}),
				mkNode("v4-only", "10.0.0.2"),
				mkNode("v6-only", "FD00::3"),
			}},
			opts: Options{BackendSets: map[string]Takes{"v4": {Family: IPv4}, "v6": {Family: IPv6}}},
			want: []BackendSet{
				{Name: "v4", Backends: []Backend{{"10.0.0.1", 31000, 1, ""}, {"10.0.0.2", 31000, 1, ""}}},
				{Name: "v6", Backends: []Backend{{"fd00::1", 31000, 1, ""}, {"fd00::3", 31000, 1, ""}}},
			},
			wantIssues: []string{v1beta1.ReasonNodeWithoutAddress, v1beta1.ReasonNodeWithoutAddress},
		},
		{
			// A node without one (a self-managed cluster) goes by address
			// alone, as the original operator registered it.
			name: "a source-preserving backend set takes each node's instance OCID from spec.providerID",
			spec: v1beta1.LBRegistrarSpec{Services: []v1beta1.Target{{NodePort: 31000, BackendSetName: "preserving", Weight: 1}}},
			cluster: Cluster{Nodes: []*corev1.Node{
				mkNode("oke", "10.0.0.1", func(n *corev1.Node) { n.Spec.ProviderID = "oci://ocid1.instance.oc1.iad.a" }),
				mkNode("bare", "10.0.0.2", func(n *corev1.Node) { n.Spec.ProviderID = "ocid1.instance.oc1.iad.b" }),
				mkNode("elsewhere", "10.0.0.3", func(n *corev1.Node) { n.Spec.ProviderID = "kind://docker/kind/node" }),
			}},
			opts: Options{BackendSets: map[string]Takes{"preserving": {Family: IPv4, Instance: true}}},
			want: []BackendSet{{Name: "preserving", Backends: []Backend{
				{"10.0.0.1", 31000, 1, "ocid1.instance.oc1.iad.a"}, {"10.0.0.2", 31000, 1, "ocid1.instance.oc1.iad.b"}, {"10.0.0.3", 31000, 1, ""}}}},
		},
		{
			// Oracle's cloud controller manager (util.go NodeInternalIP,
			// NodeExternalIp; load_balancer_spec.go getBackends): an IPv6
			// InternalIP, the last listed, or else an IPv6 ExternalIP, as it
			// reports a VNIC's global unicast address; IPv4 by InternalIP
			// only, the first (the original operator's).
			name: "IPv6 by the last InternalIP, else the ExternalIP, as Oracle's cloud controller manager picks",
			spec: v1beta1.LBRegistrarSpec{Services: []v1beta1.Target{
				{NodePort: 31000, BackendSetName: "v4", Weight: 1}, {NodePort: 31000, BackendSetName: "v6", Weight: 1}}},
			cluster: Cluster{Nodes: []*corev1.Node{
				withAddresses(mkNode("gua", ""), "InternalIP 10.0.0.1", "ExternalIP 203.0.113.1", "ExternalIP 2603:c020::1"),
				withAddresses(mkNode("ula", ""), "InternalIP 10.0.0.2", "InternalIP fd00::2", "ExternalIP 2603:c020::2"),
				withAddresses(mkNode("two", ""), "InternalIP 10.0.0.3", "InternalIP 10.0.0.9", "InternalIP fd00::3", "InternalIP fd00::9"),
			}},
			opts: Options{BackendSets: map[string]Takes{"v4": {Family: IPv4}, "v6": {Family: IPv6}}},
			want: []BackendSet{
				{Name: "v4", Backends: []Backend{{"10.0.0.1", 31000, 1, ""}, {"10.0.0.2", 31000, 1, ""}, {"10.0.0.3", 31000, 1, ""}}},
				{Name: "v6", Backends: []Backend{{"2603:c020::1", 31000, 1, ""}, {"fd00::2", 31000, 1, ""}, {"fd00::9", 31000, 1, ""}}},
			},
		},
		{
			// An instance OCID names its primary VNIC's IPv4 address; the
			// cloud controller manager sends IPv6 backends by address alone.
			name: "a source-preserving IPv6 backend set takes addresses alone",
			spec: v1beta1.LBRegistrarSpec{Services: []v1beta1.Target{{NodePort: 31000, BackendSetName: "preserving6", Weight: 1}}},
			cluster: Cluster{Nodes: []*corev1.Node{
				mkNode("oke", "fd00::1", func(n *corev1.Node) { n.Spec.ProviderID = "oci://ocid1.instance.oc1.iad.a" }),
			}},
			opts: Options{BackendSets: map[string]Takes{"preserving6": {Family: IPv6, Instance: true}}},
			want: []BackendSet{{Name: "preserving6", Backends: []Backend{{"fd00::1", 31000, 1, ""}}}},
		},
		{
			// kube-proxy answers a single-stack Service's node port only on
			// addresses of its family.
			name: "a Service is registered only where its IP family is taken",
			spec: v1beta1.LBRegistrarSpec{Services: []v1beta1.Target{
				svcTarget(intstr.FromString("http"), "v4", 1), svcTarget(intstr.FromString("http"), "v6", 1), svcTarget(intstr.FromString("http"), "classic", 1)}},
			cluster: Cluster{Nodes: []*corev1.Node{mkNode("dual", "10.0.0.1", withAddress("fd00::1"))}, Services: map[types.NamespacedName]*corev1.Service{
				gwKey: withFamilies(mkService("ns", "gw", corev1.ServiceTypeNodePort, corev1.ServicePort{Name: "http", Port: 80, NodePort: 30080}), corev1.IPv6Protocol)}},
			opts: Options{BackendSets: map[string]Takes{"v4": {Family: IPv4}, "v6": {Family: IPv6}}},
			want: []BackendSet{
				{Name: "classic", Held: &Issue{Reason: v1beta1.ReasonServiceIPFamily}},
				{Name: "v4", Held: &Issue{Reason: v1beta1.ReasonServiceIPFamily}},
				{Name: "v6", Backends: []Backend{{"fd00::1", 30080, 1, ""}}},
			},
			wantIssues: []string{v1beta1.ReasonServiceIPFamily, v1beta1.ReasonServiceIPFamily},
		},
		{
			name: "a dual-stack Service, or one whose family only its ClusterIP says, is taken as it says",
			spec: v1beta1.LBRegistrarSpec{Services: []v1beta1.Target{
				svcTarget(intstr.FromString("http"), "v6", 1), {Namespace: "ns", Name: "old", Port: ptr.To(intstr.FromString("http")), BackendSetName: "v6-old", Weight: 1}}},
			cluster: Cluster{Nodes: []*corev1.Node{mkNode("dual", "10.0.0.1", withAddress("fd00::1"))}, Services: map[types.NamespacedName]*corev1.Service{
				gwKey: withFamilies(mkService("ns", "gw", corev1.ServiceTypeNodePort, corev1.ServicePort{Name: "http", Port: 80, NodePort: 30080}), corev1.IPv4Protocol, corev1.IPv6Protocol),
				{Namespace: "ns", Name: "old"}: func() *corev1.Service {
					s := mkService("ns", "old", corev1.ServiceTypeNodePort, corev1.ServicePort{Name: "http", Port: 80, NodePort: 30081})
					s.Spec.ClusterIP = "10.96.0.10"
					return s
				}()}},
			opts: Options{BackendSets: map[string]Takes{"v6": {Family: IPv6}, "v6-old": {Family: IPv6}}},
			want: []BackendSet{
				{Name: "v6", Backends: []Backend{{"fd00::1", 30080, 1, ""}}},
				{Name: "v6-old", Held: &Issue{Reason: v1beta1.ReasonServiceIPFamily}},
			},
			wantIssues: []string{v1beta1.ReasonServiceIPFamily},
		},
		{
			name:       "no node has an address of the family: held",
			spec:       v1beta1.LBRegistrarSpec{Services: []v1beta1.Target{{NodePort: 31000, BackendSetName: "v6", Weight: 1}}},
			cluster:    Cluster{Nodes: []*corev1.Node{mkNode("a", "10.0.0.1")}},
			opts:       Options{BackendSets: map[string]Takes{"v6": {Family: IPv6}}},
			want:       []BackendSet{{Name: "v6", Held: &Issue{Reason: v1beta1.ReasonNoEligibleNodes}}},
			wantIssues: []string{v1beta1.ReasonNodeWithoutAddress, v1beta1.ReasonNoEligibleNodes},
		},
		{
			name: "filterByEndpoints keeps nodes with ready endpoints",
			spec: v1beta1.LBRegistrarSpec{Services: []v1beta1.Target{func() v1beta1.Target {
				t := svcTarget(intstr.FromString("http"), "bs", 1)
				t.FilterByEndpoints = true
				return t
			}()}},
			cluster: Cluster{Nodes: threeNodes, Services: map[types.NamespacedName]*corev1.Service{gwKey: gw},
				EndpointSlices: map[types.NamespacedName][]*discoveryv1.EndpointSlice{gwKey: {
					slice(map[string]*bool{"a": nil, "b": ptr.To(false)}),
					slice(map[string]*bool{"c": ptr.To(true)}),
				}}},
			want: []BackendSet{{Name: "bs", Backends: []Backend{{"10.0.0.1", 30080, 1, ""}, {"10.0.0.3", 30080, 1, ""}}}},
		},
		{
			name: "externalTrafficPolicy Local narrows like filterByEndpoints",
			spec: v1beta1.LBRegistrarSpec{Services: []v1beta1.Target{svcTarget(intstr.FromString("http"), "bs", 1)}},
			cluster: Cluster{Nodes: threeNodes, Services: map[types.NamespacedName]*corev1.Service{gwKey: func() *corev1.Service {
				s := gw.DeepCopy()
				s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
				return s
			}()}, EndpointSlices: map[types.NamespacedName][]*discoveryv1.EndpointSlice{gwKey: {slice(map[string]*bool{"b": nil})}}},
			want: []BackendSet{{Name: "bs", Backends: []Backend{{"10.0.0.2", 30080, 1, ""}}}},
		},
		{
			name: "zero ready endpoints holds the backend set",
			spec: v1beta1.LBRegistrarSpec{Services: []v1beta1.Target{func() v1beta1.Target {
				t := svcTarget(intstr.FromString("http"), "bs", 1)
				t.FilterByEndpoints = true
				return t
			}()}},
			cluster: Cluster{Nodes: threeNodes, Services: map[types.NamespacedName]*corev1.Service{gwKey: gw},
				EndpointSlices: map[types.NamespacedName][]*discoveryv1.EndpointSlice{gwKey: {slice(map[string]*bool{"a": ptr.To(false)})}}},
			want:       []BackendSet{{Name: "bs", Held: &Issue{Reason: v1beta1.ReasonNoReadyEndpoints}}},
			wantIssues: []string{v1beta1.ReasonNoReadyEndpoints},
		},
		{
			name:    "two nodes reporting one address make one backend",
			spec:    v1beta1.LBRegistrarSpec{Services: []v1beta1.Target{{NodePort: 30080, BackendSetName: "bs", Weight: 1}}},
			cluster: Cluster{Nodes: []*corev1.Node{mkNode("b", "10.0.0.2"), mkNode("a", "10.0.0.1"), mkNode("a2", "10.0.0.1")}},
			want:    []BackendSet{{Name: "bs", Backends: []Backend{{IP: "10.0.0.1", Port: 30080, Weight: 1}, {IP: "10.0.0.2", Port: 30080, Weight: 1}}}},
		},
		{
			name:       "missing service holds",
			spec:       v1beta1.LBRegistrarSpec{Services: []v1beta1.Target{svcTarget(intstr.FromString("http"), "bs", 1)}},
			cluster:    Cluster{Nodes: threeNodes},
			want:       []BackendSet{{Name: "bs", Held: &Issue{Reason: v1beta1.ReasonServiceNotFound}}},
			wantIssues: []string{v1beta1.ReasonServiceNotFound},
		},
		{
			name: "clusterIP service is reported",
			spec: v1beta1.LBRegistrarSpec{Services: []v1beta1.Target{svcTarget(intstr.FromString("http"), "bs", 1)}},
			cluster: Cluster{Nodes: threeNodes, Services: map[types.NamespacedName]*corev1.Service{
				gwKey: mkService("ns", "gw", corev1.ServiceTypeClusterIP, corev1.ServicePort{Name: "http", Port: 80})}},
			want:       []BackendSet{{Name: "bs", Held: &Issue{Reason: v1beta1.ReasonServiceTypeUnsupported}}},
			wantIssues: []string{v1beta1.ReasonServiceTypeUnsupported},
		},
		{
			name: "nodeport not allocated is a condition, not an empty set",
			spec: v1beta1.LBRegistrarSpec{Services: []v1beta1.Target{svcTarget(intstr.FromString("http"), "bs", 1)}},
			cluster: Cluster{Nodes: threeNodes, Services: map[types.NamespacedName]*corev1.Service{
				gwKey: mkService("ns", "gw", corev1.ServiceTypeLoadBalancer, corev1.ServicePort{Name: "http", Port: 80})}},
			want:       []BackendSet{{Name: "bs", Held: &Issue{Reason: v1beta1.ReasonNodePortNotAllocated}}},
			wantIssues: []string{v1beta1.ReasonNodePortNotAllocated},
		},
		{
			// kube-proxy proxies both; the load balancer's backends take TCP,
			// whichever the Service lists first.
			name: "a number given to a UDP and a TCP port resolves to the TCP one",
			spec: v1beta1.LBRegistrarSpec{Services: []v1beta1.Target{svcTarget(intstr.FromInt32(53), "bs", 1)}},
			cluster: Cluster{Nodes: threeNodes[:1], Services: map[types.NamespacedName]*corev1.Service{gwKey: mkService("ns", "gw", corev1.ServiceTypeNodePort,
				corev1.ServicePort{Name: "dns-udp", Port: 53, Protocol: corev1.ProtocolUDP, NodePort: 30053},
				corev1.ServicePort{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP, NodePort: 30054})}},
			want: []BackendSet{{Name: "bs", Backends: []Backend{{"10.0.0.1", 30054, 1, ""}}}},
		},
		{
			// An NLB listener may be UDP or TCP_AND_UDP (SDK
			// ListenerProtocolsEnum); its backend set gets the node port of the
			// Service port of the protocol it forwards.
			name: "a UDP listener's backend set takes the UDP port a number names",
			spec: v1beta1.LBRegistrarSpec{Services: []v1beta1.Target{svcTarget(intstr.FromInt32(53), "dns", 1), svcTarget(intstr.FromInt32(53), "both", 1)}},
			cluster: Cluster{Nodes: threeNodes[:1], Services: map[types.NamespacedName]*corev1.Service{gwKey: mkService("ns", "gw", corev1.ServiceTypeNodePort,
				corev1.ServicePort{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP, NodePort: 30054},
				corev1.ServicePort{Name: "dns-udp", Port: 53, Protocol: corev1.ProtocolUDP, NodePort: 30053})}},
			opts: Options{BackendSets: map[string]Takes{"dns": {Protocols: []corev1.Protocol{corev1.ProtocolUDP}},
				"both": {Protocols: []corev1.Protocol{corev1.ProtocolTCP, corev1.ProtocolUDP}}}},
			// TCP_AND_UDP: the first port the Service lists, as Oracle's
			// cloud controller manager picks (getBackendSetNamePortMap).
			want: []BackendSet{{Name: "both", Backends: []Backend{{"10.0.0.1", 30054, 1, ""}}}, {Name: "dns", Backends: []Backend{{"10.0.0.1", 30053, 1, ""}}}},
		},
		{
			// Which port a Service target takes depends on the listeners;
			// a fixed node port does not.
			name: "a backend set whose listeners are unread holds Service targets",
			spec: v1beta1.LBRegistrarSpec{Services: []v1beta1.Target{svcTarget(intstr.FromString("https"), "dns", 1), {NodePort: 30080, BackendSetName: "fixed", Weight: 1}}},
			cluster: Cluster{Nodes: threeNodes[:1], Services: map[types.NamespacedName]*corev1.Service{gwKey: mkService("ns", "gw", corev1.ServiceTypeNodePort,
				corev1.ServicePort{Name: "https", Port: 443, Protocol: corev1.ProtocolTCP, NodePort: 30443})}},
			opts: Options{BackendSets: map[string]Takes{"dns": {ProtocolsUnread: "500 InternalServerError"}, "fixed": {ProtocolsUnread: "500 InternalServerError"}}},
			want: []BackendSet{{Name: "dns", Held: &Issue{Reason: v1beta1.ReasonListenersUnread}},
				{Name: "fixed", Backends: []Backend{{"10.0.0.1", 30080, 1, ""}}}},
			wantIssues: []string{v1beta1.ReasonListenersUnread},
		},
		{
			name: "a UDP listener's backend set and a TCP port is a condition",
			spec: v1beta1.LBRegistrarSpec{Services: []v1beta1.Target{svcTarget(intstr.FromString("https"), "dns", 1)}},
			cluster: Cluster{Nodes: threeNodes[:1], Services: map[types.NamespacedName]*corev1.Service{gwKey: mkService("ns", "gw", corev1.ServiceTypeNodePort,
				corev1.ServicePort{Name: "https", Port: 443, Protocol: corev1.ProtocolTCP, NodePort: 30443})}},
			opts:       Options{BackendSets: map[string]Takes{"dns": {Protocols: []corev1.Protocol{corev1.ProtocolUDP}}}},
			want:       []BackendSet{{Name: "dns", Held: &Issue{Reason: v1beta1.ReasonServicePortProtocol}}},
			wantIssues: []string{v1beta1.ReasonServicePortProtocol},
		},
		{
			name: "a UDP-only port is a condition, not a silent pick",
			spec: v1beta1.LBRegistrarSpec{Services: []v1beta1.Target{svcTarget(intstr.FromInt32(53), "bs", 1), svcTarget(intstr.FromString("sctp"), "bs2", 1)}},
			cluster: Cluster{Nodes: threeNodes[:1], Services: map[types.NamespacedName]*corev1.Service{gwKey: mkService("ns", "gw", corev1.ServiceTypeNodePort,
				corev1.ServicePort{Name: "dns-udp", Port: 53, Protocol: corev1.ProtocolUDP, NodePort: 30053},
				corev1.ServicePort{Name: "sctp", Port: 9899, Protocol: corev1.ProtocolSCTP, NodePort: 30099})}},
			want:       []BackendSet{{Name: "bs", Held: &Issue{Reason: v1beta1.ReasonServicePortProtocol}}, {Name: "bs2", Held: &Issue{Reason: v1beta1.ReasonServicePortProtocol}}},
			wantIssues: []string{v1beta1.ReasonServicePortProtocol, v1beta1.ReasonServicePortProtocol},
		},
		{
			name:       "unknown port name",
			spec:       v1beta1.LBRegistrarSpec{Services: []v1beta1.Target{svcTarget(intstr.FromString("grpc"), "bs", 1)}},
			cluster:    Cluster{Nodes: threeNodes, Services: map[types.NamespacedName]*corev1.Service{gwKey: gw}},
			want:       []BackendSet{{Name: "bs", Held: &Issue{Reason: v1beta1.ReasonServicePortNotFound}}},
			wantIssues: []string{v1beta1.ReasonServicePortNotFound},
		},
		{
			name:       "no nodes holds rather than empties",
			spec:       v1beta1.LBRegistrarSpec{Services: []v1beta1.Target{{NodePort: 31000, BackendSetName: "bs", Weight: 1}}},
			cluster:    Cluster{Nodes: []*corev1.Node{mkNode("x", "10.0.0.9", excluded)}},
			want:       []BackendSet{{Name: "bs", Held: &Issue{Reason: v1beta1.ReasonNoEligibleNodes}}},
			wantIssues: []string{v1beta1.ReasonNoEligibleNodes},
		},
		{
			name: "two targets share a backend set, two sets, duplicate with other weight",
			spec: v1beta1.LBRegistrarSpec{Services: []v1beta1.Target{
				svcTarget(intstr.FromString("https"), "tls", 1),
				svcTarget(intstr.FromString("http"), "tls", 1),
				svcTarget(intstr.FromString("http"), "plain", 1),
				svcTarget(intstr.FromString("http"), "plain", 5),
			}},
			cluster: Cluster{Nodes: threeNodes[:1], Services: map[types.NamespacedName]*corev1.Service{gwKey: gw}},
			want: []BackendSet{
				{Name: "plain", Backends: []Backend{{"10.0.0.1", 30080, 1, ""}}},
				{Name: "tls", Backends: []Backend{{"10.0.0.1", 30080, 1, ""}, {"10.0.0.1", 30443, 1, ""}}},
			},
			wantIssues: []string{v1beta1.ReasonDuplicateBackend},
		},
		{
			name: "a held target holds its whole backend set only",
			spec: v1beta1.LBRegistrarSpec{Services: []v1beta1.Target{
				svcTarget(intstr.FromString("https"), "a", 1),
				{Name: "gone", Namespace: "ns", Port: ptr.To(intstr.FromInt32(80)), BackendSetName: "a", Weight: 1},
				svcTarget(intstr.FromString("http"), "b", 1),
			}},
			cluster: Cluster{Nodes: threeNodes[:1], Services: map[types.NamespacedName]*corev1.Service{gwKey: gw}},
			want: []BackendSet{
				{Name: "a", Held: &Issue{Reason: v1beta1.ReasonServiceNotFound}},
				{Name: "b", Backends: []Backend{{"10.0.0.1", 30080, 1, ""}}},
			},
			wantIssues: []string{v1beta1.ReasonServiceNotFound},
		},
	})
}

// computeCase is a row of a Compute table test.
type computeCase struct {
	name       string
	spec       v1beta1.LBRegistrarSpec
	cluster    Cluster
	opts       Options
	want       []BackendSet // of Held, only the reason is compared
	wantIssues []string     // reasons
}

func runComputeCases(t *testing.T, tests []computeCase) {
	t.Helper()
	onlyReason := cmp.Comparer(func(a, b *Issue) bool {
		if a == nil || b == nil {
			return a == b
		}
		return a.Reason == b.Reason
	})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Compute(&tc.spec, tc.cluster, tc.opts)
			// PodBackends has a test of its own (TestPodBackendsAreNamed).
			if d := cmp.Diff(tc.want, got.BackendSets, onlyReason, cmpopts.IgnoreFields(BackendSet{}, "PodBackends")); d != "" {
				t.Errorf("backend sets (-want +got):\n%s", d)
			}
			var reasons []string
			for _, is := range got.Issues {
				reasons = append(reasons, is.Reason)
				if is.Message == "" {
					t.Errorf("issue %s has no message", is.Reason)
				}
			}
			if d := cmp.Diff(tc.wantIssues, reasons); d != "" {
				t.Errorf("issues (-want +got):\n%s\n%v", d, got.Issues)
			}
		})
	}
}

func TestIssueMessagesNameTheField(t *testing.T) {
	spec := v1beta1.LBRegistrarSpec{Services: []v1beta1.Target{{NodePort: 1, BackendSetName: "x", Weight: 1}, svcTarget(intstr.FromString("http"), "bs", 1)}}
	got := Compute(&spec, Cluster{Nodes: []*corev1.Node{mkNode("a", "10.0.0.1")}}, Options{})
	if len(got.Issues) != 1 || !strings.Contains(got.Issues[0].Message, "services[1]") || !strings.Contains(got.Issues[0].Message, "ns/gw") {
		t.Fatalf("issues = %+v", got.Issues)
	}
}

func TestNodeChanged(t *testing.T) {
	base := mkNode("a", "10.0.0.1")
	heartbeat := base.DeepCopy()
	heartbeat.Status.Conditions[0].LastHeartbeatTime = metav1.Now()
	heartbeat.ResourceVersion = "2"
	tests := []struct {
		name string
		cur  *corev1.Node
		want bool
	}{
		{"heartbeat only", heartbeat, false},
		{"excluded", mkNode("a", "10.0.0.1", excluded), true},
		{"tainted", mkNode("a", "10.0.0.1", autoscaled), true},
		{"relabelled", mkNode("a", "10.0.0.1", label("pool", "x")), true},
		{"address", mkNode("a", "10.0.0.2"), true},
		{"not ready", mkNode("a", "10.0.0.1", notReady), true},
		{"deleting", mkNode("a", "10.0.0.1", deleting), true},
	}
	for _, tc := range tests {
		if got := NodeChanged(base, tc.cur); got != tc.want {
			t.Errorf("%s: NodeChanged = %v, want %v", tc.name, got, tc.want)
		}
	}
	if !NodeChanged(mkNode("a", "10.0.0.1", notReady), mkNode("a", "10.0.0.1", shuttingDown)) {
		t.Error("a NotReady node starting to shut down is not a change")
	}
}

// A node that is leaving, by whichever tool's word, backs no load balancer;
// other taints and readiness alone do not take a node out (KEP-3458).
func TestDepartingNodesAreNotEligible(t *testing.T) {
	tests := []struct {
		name     string
		opts     []nodeOpt
		eligible bool
	}{
		{"plain", nil, true},
		{"cluster autoscaler", []nodeOpt{autoscaled}, false},
		{"Karpenter v1", []nodeOpt{tainted(TaintKarpenterDisrupted, "")}, false},
		{"Karpenter v1beta1", []nodeOpt{tainted(TaintKarpenterDisruption, "disrupting")}, false},
		{"Karpenter v1beta1 key with another value", []nodeOpt{tainted(TaintKarpenterDisruption, "candidate")}, true},
		{"out of service (non-graceful shutdown)", []nodeOpt{tainted(corev1.TaintNodeOutOfService, "nodeshutdown")}, false},
		{"instance stopped", []nodeOpt{tainted(TaintNodeCloudShutdown, "")}, false},
		{"graceful shutdown", []nodeOpt{shuttingDown}, false},
		{"kubelet stopped after its shutdown", []nodeOpt{readyCondition(corev1.ConditionUnknown, "NodeStatusUnknown", "Kubelet stopped posting node status.")}, true},
		{"NotReady for another reason", []nodeOpt{readyCondition(corev1.ConditionFalse, "KubeletNotReady", "container runtime is down")}, true},
		{"another taint", []nodeOpt{tainted("dedicated", "edge")}, true},
		{"cordoned", []nodeOpt{func(n *corev1.Node) { n.Spec.Unschedulable = true }}, true},
	}
	for _, tc := range tests {
		if got := Eligible(mkNode("a", "10.0.0.1", tc.opts...)); got != tc.eligible {
			t.Errorf("%s: eligible %v, want %v", tc.name, got, tc.eligible)
		}
	}
}

// Which endpoints make a node count, as kube-proxy has it (KEP-1669): local
// is externalTrafficPolicy Local, where the want is the same unless
// wantLocal says otherwise.
func TestServingNodes(t *testing.T) {
	yes, no := ptr.To(true), ptr.To(false)
	conditions := func(ready, serving, terminating *bool) discoveryv1.EndpointConditions {
		return discoveryv1.EndpointConditions{Ready: ready, Serving: serving, Terminating: terminating}
	}
	endpoint := func(node string, c discoveryv1.EndpointConditions) discoveryv1.Endpoint {
		return discoveryv1.Endpoint{NodeName: ptr.To(node), Conditions: c}
	}
	tests := []struct {
		name   string
		slices []*discoveryv1.EndpointSlice
		want   []string
	}{
		{"ready", []*discoveryv1.EndpointSlice{gwSlice(endpoint("a", conditions(yes, yes, no)))}, []string{"a"}},
		{"ready unset counts as ready", []*discoveryv1.EndpointSlice{gwSlice(endpoint("a", conditions(nil, nil, nil)))}, []string{"a"}},
		{"not ready, not terminating", []*discoveryv1.EndpointSlice{gwSlice(endpoint("a", conditions(no, no, no)))}, nil},
		{"terminating and serving", []*discoveryv1.EndpointSlice{gwSlice(endpoint("a", conditions(no, yes, yes)))}, []string{"a"}},
		{"terminating, no longer serving", []*discoveryv1.EndpointSlice{gwSlice(endpoint("a", conditions(no, no, yes)))}, nil},
		{"terminating, serving unset reads as serving", []*discoveryv1.EndpointSlice{gwSlice(endpoint("a", conditions(no, nil, yes)))}, []string{"a"}},
		{"serving but terminating unset", []*discoveryv1.EndpointSlice{gwSlice(endpoint("a", conditions(no, yes, nil)))}, nil},
		{"rolling update: old pod terminating and serving, new pod not ready", []*discoveryv1.EndpointSlice{gwSlice(
			endpoint("a", conditions(no, yes, yes)), endpoint("a", conditions(no, no, no)), endpoint("b", conditions(yes, yes, no)))}, []string{"a", "b"}},
		{"a ready endpoint beside a terminating one", []*discoveryv1.EndpointSlice{gwSlice(
			endpoint("a", conditions(no, yes, yes)), endpoint("a", conditions(yes, yes, no)))}, []string{"a"}},
		{"no node name", []*discoveryv1.EndpointSlice{gwSlice(discoveryv1.Endpoint{Conditions: conditions(yes, yes, no)})}, nil},
		{"IPv6 slices count", []*discoveryv1.EndpointSlice{withPorts(sliceOf(gwKey.Namespace, gwKey.Name, discoveryv1.AddressTypeIPv6, endpoint("a", conditions(yes, nil, nil))), gwSlice().Ports...)}, []string{"a"}},
		// kube-proxy keys endpoints by a slice's port names and protocols.
		{"a slice without the port does not count", []*discoveryv1.EndpointSlice{
			withPorts(gwSlice(endpoint("a", conditions(yes, nil, nil))), discoveryv1.EndpointPort{Name: ptr.To("http"), Port: ptr.To[int32](8080)}),
			gwSlice(endpoint("b", conditions(yes, nil, nil)))}, []string{"b"}},
		{"a slice of the port's name in another protocol does not count", []*discoveryv1.EndpointSlice{
			withPorts(gwSlice(endpoint("a", conditions(yes, nil, nil))), discoveryv1.EndpointPort{Name: ptr.To("https"), Port: ptr.To[int32](8443), Protocol: ptr.To(corev1.ProtocolUDP)})}, nil},
		{"a port without a number does not count", []*discoveryv1.EndpointSlice{
			withPorts(gwSlice(endpoint("a", conditions(yes, nil, nil))), discoveryv1.EndpointPort{Name: ptr.To("https")})}, nil},
		{"a slice without ports does not count", []*discoveryv1.EndpointSlice{withPorts(gwSlice(endpoint("a", conditions(yes, nil, nil))))}, nil},
		{"FQDN slices are ignored", []*discoveryv1.EndpointSlice{sliceOf(gwKey.Namespace, gwKey.Name, discoveryv1.AddressTypeFQDN, endpoint("a", conditions(yes, nil, nil)))}, nil},
		{"another Service's slice is ignored", []*discoveryv1.EndpointSlice{sliceOf(gwKey.Namespace, "other", discoveryv1.AddressTypeIPv4, endpoint("a", conditions(yes, nil, nil)))}, nil},
		{"another namespace's slice is ignored", []*discoveryv1.EndpointSlice{sliceOf("elsewhere", gwKey.Name, discoveryv1.AddressTypeIPv4, endpoint("a", conditions(yes, nil, nil)))}, nil},
	}
	// With externalTrafficPolicy Local, kube-proxy's health check counts
	// ready endpoints only: these rows differ.
	local := map[string][]string{
		"terminating and serving":                                            nil,
		"terminating, serving unset reads as serving":                        nil,
		"rolling update: old pod terminating and serving, new pod not ready": {"b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			https := &corev1.ServicePort{Name: "https", Port: 443, Protocol: corev1.ProtocolTCP}
			for _, readyOnly := range []bool{false, true} {
				want := tt.want
				if w, differs := local[tt.name]; readyOnly && differs {
					want = w
				}
				got := slices.Sorted(maps.Keys(ServingNodes(gwKey, https, tt.slices, nil, readyOnly)))
				if !slices.Equal(got, want) {
					t.Errorf("ServingNodes (ready only %t) = %q, want %q", readyOnly, got, want)
				}
			}
		})
	}
}

// The exclusion label is read by its value, as Kubernetes' cloud provider
// code reads it (kubernetes/kubernetes#131085).
func TestExclusionLabelByValue(t *testing.T) {
	for value, eligible := range map[string]bool{"false": true, "False": true, "0": true, "true": false, "TRUE": false, "1": false, "": false, "yes": false, "excluded": false} {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{corev1.LabelNodeExcludeBalancers: value}}}
		if got := Eligible(n); got != eligible {
			t.Errorf("label value %q: eligible %v, want %v", value, got, eligible)
		}
	}
	if !Eligible(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}) {
		t.Error("a node without the label is not eligible")
	}
}
