package desired

import (
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

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

// awaiting reports whether ep stands for a pod that is ready but for
// lbregistrar's readiness gate (ReadyButForGate). Such an endpoint is not
// ready, since its pod is not, yet counts as ready here: the gate turns
// True only once the load balancer has the pod, so waiting for the pod to
// be Ready first would wait forever; and once the gate is True the
// kubelet and the EndpointSlice controller take a moment to show the
// endpoint ready, in which its backend must not be drained.
func (g GatedPods) awaiting(ep *discoveryv1.Endpoint) bool {
	pod := g.podOf(ep)
	return pod != nil && ReadyButForGate(pod)
}

// awaitingPod is the pod ep stands for when it waits only for the gate
// (AwaitsGate), nil otherwise.
func (g GatedPods) awaitingPod(ep *discoveryv1.Endpoint) *corev1.Pod {
	if pod := g.podOf(ep); pod != nil && AwaitsGate(pod) {
		return pod
	}
	return nil
}

// podOf is the gated pod ep names, when a gate may be keeping it waiting.
func (g GatedPods) podOf(ep *discoveryv1.Endpoint) *corev1.Pod {
	key, ok := WaitingPod(ep)
	if !ok {
		return nil
	}
	if pod := g[key]; pod != nil && pod.UID == ep.TargetRef.UID {
		return pod
	}
	return nil
}

// WaitingPod is the pod of ep when it may be waiting for a readiness gate: the
// endpoint is a pod's, not ready (as kube-proxy reads it: unset is ready)
// and not terminating.
func WaitingPod(ep *discoveryv1.Endpoint) (types.NamespacedName, bool) {
	ref := ep.TargetRef
	if ready, _ := conditions(ep.Conditions); ready || ref == nil || ref.Kind != "Pod" || ep.Conditions.Terminating != nil && *ep.Conditions.Terminating {
		return types.NamespacedName{}, false
	}
	return types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, true
}

// AwaitsGate reports whether pod waits only for lbregistrar's readiness
// gate: ready but for it (ReadyButForGate), the gate not True yet.
func AwaitsGate(pod *corev1.Pod) bool { return ReadyButForGate(pod) && !GateTrue(pod) }

// ReadyButForGate reports whether pod is Ready, or would be but for
// lbregistrar's readiness gate: it has the gate, its containers are ready
// (a failing readiness probe makes them not), it is not being deleted, and
// its Ready condition is not False for another reason. The kubelet gives
// a pod whose containers are ready and a gate not True the reason
// ReadinessGatesNotReady (pkg/kubelet/status/generate.go), and keeps it
// until it has seen the gate True; the node lifecycle controller marks
// the pods of a node it cannot reach not Ready by the status alone
// (pkg/controller/util/node MarkPodsNotReady), which kube-proxy then
// drops, and so does this.
func ReadyButForGate(pod *corev1.Pod) bool {
	if pod.DeletionTimestamp != nil || !HasGate(pod) || !conditionTrue(pod, corev1.ContainersReady) {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status != corev1.ConditionFalse || c.Reason == kubeletGatesNotReady
		}
	}
	return true
}

// kubeletGatesNotReady is the reason of the Ready condition the kubelet
// writes while a pod's readiness gates are not all True
// (pkg/kubelet/status/generate.go ReadinessGatesNotReady).
const kubeletGatesNotReady = "ReadinessGatesNotReady"

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

// Gate is one target of an LBRegistrar that gates a pod: it registers a
// Service that selects the pod, for its pods (GatesPods).
type Gate struct {
	LBRegistrar    string
	Generation     int64 // of the LBRegistrar's spec, which its reconcile's Stands follow
	LoadBalancerID string
	BackendSet     string
	Target         int // its index in spec.services
	// Suspended: the resource writes nothing (spec.suspend), so the gate
	// waits until it resumes or is released.
	Suspended bool
	// Released: the resource carries v1beta1.ReleaseGatesAnnotation.
	Released bool
}

// Gating is the one answer to "which targets gate pod": those of registrars
// that register a Service of services selecting pod, for its pods
// (GatesPods). A resource being deleted gates nothing: it is taking its
// backends out. A suspended one still gates (and is blocked: Gate.Suspended),
// so that a rollout during a suspension does not end with the load balancer
// having only gone pods. The admission webhook gives a pod the gate when this
// is not empty, the gates controller waits for each target, and the watches
// wake their resources.
func Gating(pod *corev1.Pod, services []*corev1.Service, registrars []*v1beta1.LBRegistrar) []Gate {
	var out []Gate
	for _, svc := range services {
		if !Selects(svc, pod) {
			continue
		}
		for _, r := range registrars {
			if r.DeletionTimestamp != nil {
				continue
			}
			for i := range r.Spec.Services {
				t := &r.Spec.Services[i]
				if t.Namespace != svc.Namespace || t.Name != svc.Name || !GatesPods(t, svc) {
					continue
				}
				out = append(out, Gate{LBRegistrar: r.Name, Generation: r.Generation, LoadBalancerID: r.Spec.LoadBalancerID,
					BackendSet: t.BackendSetName, Target: i, Suspended: r.Spec.Suspend, Released: r.Annotations[v1beta1.ReleaseGatesAnnotation] == "true"})
			}
		}
	}
	return out
}
