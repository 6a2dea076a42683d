package desired

import (
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
)

// The Trim functions drop, from objects the controller caches, everything
// the desired state (Compute, NodeChanged, ServingNodes, podEndpoints) never reads. A
// cluster of thousands of nodes keeps each node's images, capacity, system
// info and a dozen conditions, and every object its managed fields and
// annotations, which would otherwise dominate the controller's memory.
// Nothing here writes the objects back, so nothing is lost on the server.

// TrimNode keeps a node's name, labels, deletion mark, spec (taints,
// provider ID), addresses and Ready condition's status, and of its message
// only whether the kubelet says the node is shutting down.
func TrimNode(n *corev1.Node) *corev1.Node {
	trimMeta(&n.ObjectMeta)
	var ready []corev1.NodeCondition
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			ready = []corev1.NodeCondition{{Type: c.Type, Status: c.Status}}
			if ShuttingDown(n) {
				ready[0].Message = kubeletShuttingDown
			}
			break
		}
	}
	n.Status = corev1.NodeStatus{Addresses: n.Status.Addresses, Conditions: ready}
	return n
}

// TrimEndpointSlice keeps a slice's Service label, address type, ports
// (name, number, protocol: which Service port it serves) and, per
// endpoint, its node, conditions, first address (the one kube-proxy and
// Pod targets use) and which pod it is.
func TrimEndpointSlice(s *discoveryv1.EndpointSlice) *discoveryv1.EndpointSlice {
	trimMeta(&s.ObjectMeta)
	for i, ep := range s.Endpoints {
		var pod *corev1.ObjectReference
		if ref := ep.TargetRef; ref != nil && ref.Kind == "Pod" {
			pod = &corev1.ObjectReference{Kind: ref.Kind, Namespace: ref.Namespace, Name: ref.Name, UID: ref.UID}
		}
		s.Endpoints[i] = discoveryv1.Endpoint{Addresses: ep.Addresses[:min(1, len(ep.Addresses))], NodeName: ep.NodeName, Conditions: ep.Conditions, TargetRef: pod}
	}
	for i, p := range s.Ports {
		s.Ports[i] = discoveryv1.EndpointPort{Name: p.Name, Port: p.Port, Protocol: p.Protocol}
	}
	return s
}

// TrimPod keeps, of a pod that carries lbregistrar's readiness gate, its
// name, labels, UID, deletion mark, readiness gates, node, addresses and
// the conditions the gate depends on (ContainersReady, Ready, the gate's).
func TrimPod(p *corev1.Pod) *corev1.Pod {
	trimMeta(&p.ObjectMeta)
	p.Spec = corev1.PodSpec{ReadinessGates: p.Spec.ReadinessGates, NodeName: p.Spec.NodeName}
	var kept []corev1.PodCondition
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.ContainersReady || c.Type == corev1.PodReady || c.Type == v1beta1.ReadinessGate {
			kept = append(kept, c)
		}
	}
	p.Status = corev1.PodStatus{Conditions: kept, PodIP: p.Status.PodIP, PodIPs: p.Status.PodIPs}
	return p
}

// TrimService keeps a Service's spec (type, ports, traffic policy).
func TrimService(s *corev1.Service) *corev1.Service {
	trimMeta(&s.ObjectMeta)
	s.Status = corev1.ServiceStatus{}
	return s
}

// trimMeta drops managed fields and annotations (kubectl's
// last-applied-configuration alone can be as large as the object).
func trimMeta(m *metav1.ObjectMeta) {
	m.ManagedFields = nil
	m.Annotations = nil
}
