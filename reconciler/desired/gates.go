package desired

import (
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
)

// GatesPods reports whether target t, of Service svc, makes its pods'
// readiness wait for the load balancer (v1beta1.ReadinessGate): a Pod
// target registers each pod; a node target does where the nodes it
// registers follow the Service's endpoints (filterByEndpoints,
// externalTrafficPolicy Local), so a pod's node is registered for it.
// Other node targets register every node whatever the pods do.
func GatesPods(t *v1beta1.Target, svc *corev1.Service) bool {
	return t.Pods() || t.FilterByEndpoints || svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal
}

// Selects reports whether Service svc selects pod, as the EndpointSlice
// controller reads its selector: a Service without one selects none.
func Selects(svc *corev1.Service, pod *corev1.Pod) bool {
	return svc.Namespace == pod.Namespace && len(svc.Spec.Selector) > 0 &&
		labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(pod.Labels))
}

// GatedPods are the pods that carry lbregistrar's readiness gate, by
// namespace and name.
type GatedPods map[types.NamespacedName]*corev1.Pod

// awaiting reports whether ep stands for a pod that waits only for
// lbregistrar's readiness gate (AwaitsGate). Such an endpoint is not
// ready, since its pod is not, yet counts as ready here: the gate turns
// True only once the load balancer has the pod, so waiting for the pod to
// be Ready first would wait forever.
func (g GatedPods) awaiting(ep *discoveryv1.Endpoint) bool {
	key, ok := HeldPod(ep)
	if !ok {
		return false
	}
	pod := g[key]
	return pod != nil && pod.UID == ep.TargetRef.UID && AwaitsGate(pod)
}

// HeldPod is the pod of ep when a readiness gate may be holding it: the
// endpoint is a pod's, not ready (as kube-proxy reads it: unset is ready)
// and not terminating.
func HeldPod(ep *discoveryv1.Endpoint) (types.NamespacedName, bool) {
	ref := ep.TargetRef
	if ready, _ := conditions(ep.Conditions); ready || ref == nil || ref.Kind != "Pod" || ep.Conditions.Terminating != nil && *ep.Conditions.Terminating {
		return types.NamespacedName{}, false
	}
	return types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, true
}

// AwaitsGate reports whether pod waits only for lbregistrar's readiness
// gate: it has the gate, which is not True, its containers are ready, and
// it is not being deleted.
func AwaitsGate(pod *corev1.Pod) bool {
	return pod.DeletionTimestamp == nil && HasGate(pod) && conditionTrue(pod, corev1.ContainersReady) && !GateTrue(pod)
}

// GateTrue reports whether pod's lbregistrar readiness gate condition is True.
func GateTrue(pod *corev1.Pod) bool { return conditionTrue(pod, v1beta1.ReadinessGate) }

func conditionTrue(pod *corev1.Pod, typ corev1.PodConditionType) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == typ {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// HasGate reports whether pod carries lbregistrar's readiness gate.
func HasGate(pod *corev1.Pod) bool {
	for _, g := range pod.Spec.ReadinessGates {
		if g.ConditionType == v1beta1.ReadinessGate {
			return true
		}
	}
	return false
}

// BackendsOf are the backends (ip:port, in canonical form) that stand for
// pod under target t of Service svc, whose EndpointSlices are
// endpointSlices: for a Pod target the pod's endpoint, at the port its
// slice gives; for a node target the pod's node (at each of its addresses)
// with the Service port's node port. A port named by number may be TCP and
// UDP: either's counts. listed says whether any slice lists the pod: one
// that lists it without the port has none, one not listed yet will.
func BackendsOf(pod *corev1.Pod, t *v1beta1.Target, svc *corev1.Service, endpointSlices []*discoveryv1.EndpointSlice, node *corev1.Node) (_ []string, listed bool) {
	var out []string
	for _, s := range endpointSlices {
		for k := range s.Endpoints {
			if isPod(s.Endpoints[k].TargetRef, pod) {
				listed = true
			}
		}
	}
	for j := range svc.Spec.Ports {
		sp := &svc.Spec.Ports[j]
		if !names(t, sp) {
			continue
		}
		for _, s := range endpointSlices {
			number := slicePort(s, sp)
			if number == 0 || s.Namespace != svc.Namespace || s.Labels[discoveryv1.LabelServiceName] != svc.Name {
				continue
			}
			for k := range s.Endpoints {
				ep := &s.Endpoints[k]
				if !isPod(ep.TargetRef, pod) {
					continue
				}
				switch {
				case t.Pods():
					for _, a := range ep.Addresses[:min(1, len(ep.Addresses))] {
						out = appendKey(out, a, number)
					}
				case node != nil && sp.NodePort != 0:
					for _, a := range node.Status.Addresses {
						out = appendKey(out, a.Address, sp.NodePort)
					}
				}
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out), listed
}

// HealthWaitsFor reports whether a node target's health check, for pod,
// can pass only once pod itself is Ready: kube-proxy answers a node port
// only with a ready endpoint of the Service, anywhere, or, with
// externalTrafficPolicy Local, on that node (its health check node port
// says the same). With no such endpoint but pod's, the load balancer
// cannot find pod's node healthy before the gate lets pod be Ready, so the
// gate waits for the node's registration alone.
func HealthWaitsFor(pod *corev1.Pod, svc *corev1.Service, endpointSlices []*discoveryv1.EndpointSlice) bool {
	local := svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal
	for _, s := range endpointSlices {
		for k := range s.Endpoints {
			ep := &s.Endpoints[k]
			if ready, _ := conditions(ep.Conditions); !ready || isPod(ep.TargetRef, pod) {
				continue
			}
			if !local || ep.NodeName != nil && *ep.NodeName == pod.Spec.NodeName {
				return false
			}
		}
	}
	return true
}

// isPod reports whether ref names pod.
func isPod(ref *corev1.ObjectReference, pod *corev1.Pod) bool {
	return ref != nil && ref.Kind == "Pod" && ref.Namespace == pod.Namespace && ref.Name == pod.Name && ref.UID == pod.UID
}

// names reports whether t names Service port sp, by name or number.
func names(t *v1beta1.Target, sp *corev1.ServicePort) bool {
	if t.Port == nil {
		return false
	}
	if t.Port.Type == intstr.Int {
		return sp.Port == t.Port.IntVal
	}
	return sp.Name == t.Port.StrVal
}

// appendKey appends ip:port in canonical form, as plan.Key forms it; an
// address that does not parse is left out.
func appendKey(keys []string, ip string, port int32) []string {
	addr, err := netip.ParseAddr(ip)
	if err != nil {
		return keys
	}
	return append(keys, netip.AddrPortFrom(addr.Unmap(), uint16(port)).String())
}
