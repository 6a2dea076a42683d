package webhook

import (
	"context"
	"strconv"

	"gomodules.xyz/jsonpatch/v2"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
)

// UngatePodPath is where the API server sends the pods being created with
// lbregistrar's readiness gate in namespaces that did not opt into
// readiness gates.
const UngatePodPath = "/mutate-v1-pod-ungate"

// NewPodUngate is the mutating webhook that takes lbregistrar's readiness
// gate (and its label) off a pod created with it in a namespace that did
// not opt in (v1beta1.ReadinessGatesNamespaceLabel): the controller
// caches and decides the pods of opted-in namespaces only, so such a pod
// would otherwise never be Ready. The pod is created without it, and the
// answer warns why. The ValidatingAdmissionPolicy shipped beside it
// refuses what gets past it (while no replica answers): a pod of such a
// namespace with the gate or its label.
func NewPodUngate() *admission.Webhook {
	return &admission.Webhook{Handler: podUngate{}}
}

type podUngate struct{}

func (podUngate) Handle(_ context.Context, req admission.Request) admission.Response {
	pod, answer := createdPod(req)
	if answer != nil {
		return *answer
	}
	ops := ungateOps(pod)
	if len(ops) == 0 {
		return admission.Allowed("it has no readiness gate of lbregistrar's")
	}
	return admission.Patched("its namespace did not opt into lbregistrar's readiness gates", ops...).WithWarnings(
		"namespace " + req.Namespace + " has not opted into lbregistrar's readiness gates (label " + v1beta1.ReadinessGatesNamespaceLabel + "=" + v1beta1.ReadinessGatesEnabled +
			"), so the pod is created without the gate " + v1beta1.ReadinessGate + ", which nothing would set there")
}

// ungateOps are the JSON patch operations that remove lbregistrar's gate
// and label from pod, last first so each index stays valid as it is applied.
func ungateOps(pod *corev1.Pod) []jsonpatch.JsonPatchOperation {
	var ops []jsonpatch.JsonPatchOperation
	if _, labelled := pod.Labels[v1beta1.ReadinessGateLabel]; labelled {
		ops = append(ops, jsonpatch.NewOperation("remove", "/metadata/labels/"+escapePointer(v1beta1.ReadinessGateLabel), nil))
	}
	for i := len(pod.Spec.ReadinessGates) - 1; i >= 0; i-- {
		if pod.Spec.ReadinessGates[i].ConditionType == v1beta1.ReadinessGate {
			ops = append(ops, jsonpatch.NewOperation("remove", "/spec/readinessGates/"+strconv.Itoa(i), nil))
		}
	}
	return ops
}
