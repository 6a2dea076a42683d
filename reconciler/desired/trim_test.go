package desired

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
)

// fatNode is a node as real clusters have it: managed fields, annotations,
// fifty images, capacity, system info and a dozen conditions.
func fatNode(name, ip string, opts ...nodeOpt) *corev1.Node {
	n := mkNode(name, ip, opts...)
	n.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate}}
	n.Annotations = map[string]string{"node.alpha.kubernetes.io/ttl": "0", "volumes.kubernetes.io/controller-managed-attach-detach": "true"}
	n.Spec.ProviderID = "oci://ocid1.instance.oc1.ap-tokyo-1." + name
	for i := range 50 {
		n.Status.Images = append(n.Status.Images, corev1.ContainerImage{Names: []string{fmt.Sprintf("registry.example/image-%d:v1", i)}, SizeBytes: 1 << 20})
	}
	n.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")}
	n.Status.NodeInfo = corev1.NodeSystemInfo{KubeletVersion: "v1.36.3", OSImage: "Oracle Linux 9"}
	for _, typ := range []corev1.NodeConditionType{corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure, corev1.NodeNetworkUnavailable} {
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: typ, Status: corev1.ConditionFalse, Message: "kubelet has sufficient resources"})
	}
	n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeHostName, Address: name})
	return n
}

// Trimmed objects give the same desired state and the same change
// decisions as the objects they were trimmed from.
func TestTrimKeepsWhatDesiredStateReads(t *testing.T) {
	nodes := []*corev1.Node{
		fatNode("a", "10.0.0.1"), fatNode("b", "10.0.0.2", notReady), fatNode("c", "10.0.0.3", excluded),
		fatNode("d", "10.0.0.4", autoscaled), fatNode("e", "10.0.0.5", label("role", "edge")), fatNode("f", ""),
		fatNode("g", "10.0.0.7", shuttingDown), fatNode("h", "10.0.0.8", notReady), fatNode("i", "10.0.0.9", tainted(TaintKarpenterDisrupted, "")),
	}
	svc := mkService("ns", "gw", corev1.ServiceTypeNodePort, corev1.ServicePort{Name: "http", Port: 80, NodePort: 30080})
	svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	svc.Annotations = map[string]string{corev1.LastAppliedConfigAnnotation: "{...}"}
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.1"}}
	slice := gwSlice(
		discoveryv1.Endpoint{Addresses: []string{"10.244.0.1"}, NodeName: ptr.To("a"), Hostname: ptr.To("pod-a"),
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: "pod-a"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}},
		discoveryv1.Endpoint{Addresses: []string{"10.244.0.2"}, NodeName: ptr.To("e"), Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(false), Serving: ptr.To(true), Terminating: ptr.To(true)}},
	)
	slice.Ports = []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080)}}
	nodes[0].Spec.PodCIDRs = []string{"10.244.0.0/24"} // pod-a's address is an overlay's
	slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{Addresses: []string{"10.1.0.3", "10.1.0.4"}, NodeName: ptr.To("b"),
		TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: "pod-b"}})
	full := Cluster{Nodes: nodes, NodesByName: byName(nodes...), Services: map[types.NamespacedName]*corev1.Service{gwKey: svc}, EndpointSlices: map[types.NamespacedName][]*discoveryv1.EndpointSlice{gwKey: {slice}}}

	trimmed := Cluster{Services: map[types.NamespacedName]*corev1.Service{gwKey: TrimService(svc.DeepCopy())},
		EndpointSlices: map[types.NamespacedName][]*discoveryv1.EndpointSlice{gwKey: {TrimEndpointSlice(slice.DeepCopy())}}}
	for _, n := range nodes {
		trimmed.Nodes = append(trimmed.Nodes, TrimNode(n.DeepCopy()))
	}
	trimmed.NodesByName = byName(trimmed.Nodes...)
	http := intstr.FromString("http")
	for _, spec := range []v1beta1.LBRegistrarSpec{
		{Services: []v1beta1.Target{{Name: "gw", Namespace: "ns", Port: &http, BackendSetName: "bs", Weight: 1}}},
		{Services: []v1beta1.Target{{NodePort: 31000, BackendSetName: "every", Weight: 1}}},
		{Services: []v1beta1.Target{{Name: "gw", Namespace: "ns", Port: &http, BackendSetName: "pods", Weight: 1, TargetType: v1beta1.TargetTypePod}}},
		{Services: []v1beta1.Target{{NodePort: 30443, BackendSetName: "fixed", Weight: 2}}, NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "edge"}}},
	} {
		for _, o := range []Options{{}, {RequireReady: true}} {
			if diff := cmp.Diff(Compute(&spec, full, o), Compute(&spec, trimmed, o)); diff != "" {
				t.Errorf("desired state from trimmed objects differs (-full +trimmed):\n%s", diff)
			}
		}
	}
	pods := v1beta1.LBRegistrarSpec{Services: []v1beta1.Target{{Name: "gw", Namespace: "ns", Port: &http, BackendSetName: "pods", Weight: 1, TargetType: v1beta1.TargetTypePod}}}
	if got := Compute(&pods, trimmed, Options{}); len(got.BackendSets) != 1 || len(got.BackendSets[0].Backends) != 1 || got.BackendSets[0].Backends[0].IP != "10.1.0.3" {
		t.Errorf("the pods' backend set from trimmed objects: %+v, want 10.1.0.3 alone", got)
	}
	for i := range nodes {
		for j := range nodes {
			if NodeChanged(nodes[i], nodes[j]) != NodeChanged(trimmed.Nodes[i], trimmed.Nodes[j]) {
				t.Errorf("NodeChanged(%s, %s) differs once trimmed", nodes[i].Name, nodes[j].Name)
			}
		}
	}
	if n := trimmed.Nodes[0]; len(n.Status.Images) != 0 || n.ManagedFields != nil || n.Annotations != nil || len(n.Status.Conditions) != 1 || n.Spec.ProviderID == "" {
		t.Errorf("trimmed node keeps what is never read, or lost its provider ID: %+v", n)
	}
}
