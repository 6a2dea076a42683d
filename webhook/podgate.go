package webhook

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	kjson "sigs.k8s.io/json"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/reconciler/decide"
	"github.com/peppy-ratio/lbregistrar/reconciler/desired"
)

// MutatePodPath is where the API server sends the pods being created in
// namespaces that opted into readiness gates.
const MutatePodPath = "/mutate-v1-pod"

// NewPodGate is the mutating webhook that gives a pod being created
// lbregistrar's readiness gate (v1beta1.ReadinessGate) when a target of an
// LBRegistrar gates it (decide.Gates, the one answer the gates controller
// decides from too), and the label v1beta1.ReadinessGateLabel, so the
// controller caches the pod. A pod created with the gate already (its
// template lists it) is given the label alone, so it is decided like any
// other. It reads Services and LBRegistrars through reader (the manager's
// cache). Its configuration's failurePolicy is Ignore: whatever happens
// here, the pod is created.
func NewPodGate(reader client.Reader) *admission.Webhook {
	return &admission.Webhook{Handler: &podGate{reader: reader}}
}

type podGate struct{ reader client.Reader }

// createdPod is the pod a CREATE request carries, in its namespace (a pod
// of a ReplicaSet may come without it); otherwise the answer to give.
func createdPod(req admission.Request) (*corev1.Pod, *admission.Response) {
	answer := func(r admission.Response) (*corev1.Pod, *admission.Response) { return nil, &r }
	if req.Operation != admissionv1.Create {
		return answer(admission.Allowed(""))
	}
	if len(req.Object.Raw) == 0 {
		return answer(admission.Errored(http.StatusBadRequest, errors.New("the request carries no object")))
	}
	var pod corev1.Pod
	if err := kjson.UnmarshalCaseSensitivePreserveInts(req.Object.Raw, &pod); err != nil {
		return answer(admission.Errored(http.StatusBadRequest, err))
	}
	if pod.Namespace == "" {
		pod.Namespace = req.Namespace
	}
	return &pod, nil
}

func (g *podGate) Handle(ctx context.Context, req admission.Request) admission.Response {
	p, answer := createdPod(req)
	if answer != nil {
		return *answer
	}
	pod := *p
	_, labelled := pod.Labels[v1beta1.ReadinessGateLabel]
	switch hasGate := desired.HasGate(&pod); {
	case hasGate && labelled:
		return admission.Allowed("it has the readiness gate")
	case hasGate:
		return admission.Patched("it has the readiness gate; labelled so the controller decides it", gateOps(&pod, false)...)
	}
	gates, err := decide.Gates(ctx, g.reader, &pod)
	switch {
	case err != nil:
		return admission.Allowed("").WithWarnings("lbregistrar could not tell whether a load balancer registers this pod, and gave it no readiness gate: " + err.Error())
	case len(gates) == 0:
		return admission.Allowed("no LBRegistrar registers it")
	}
	return admission.Patched("an LBRegistrar registers it", gateOps(&pod, true)...)
}

// gateOps are the JSON patch operations that add the label and, with
// gate, the readiness gate to pod, and nothing else: built from what the
// request contains, never by writing the decoded pod back, so a field newer
// than this webhook's Go types is left as it is.
func gateOps(pod *corev1.Pod, gate bool) []jsonpatch.JsonPatchOperation {
	var ops []jsonpatch.JsonPatchOperation
	if pod.Labels == nil {
		ops = append(ops, jsonpatch.NewOperation("add", "/metadata/labels", map[string]string{v1beta1.ReadinessGateLabel: ""}))
	} else {
		ops = append(ops, jsonpatch.NewOperation("add", "/metadata/labels/"+escapePointer(v1beta1.ReadinessGateLabel), ""))
	}
	if !gate {
		return ops
	}
	g := corev1.PodReadinessGate{ConditionType: v1beta1.ReadinessGate}
	if pod.Spec.ReadinessGates == nil {
		return append(ops, jsonpatch.NewOperation("add", "/spec/readinessGates", []corev1.PodReadinessGate{g}))
	}
	return append(ops, jsonpatch.NewOperation("add", "/spec/readinessGates/-", g))
}

// escapePointer escapes a JSON pointer's reference token (RFC 6901).
func escapePointer(token string) string {
	return strings.ReplaceAll(strings.ReplaceAll(token, "~", "~0"), "/", "~1")
}
