package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	kjson "sigs.k8s.io/json"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/reconciler/desired"
)

// MutatePodPath is where the API server sends the pods being created in
// namespaces that opted into readiness gates.
const MutatePodPath = "/mutate-v1-pod"

// NewPodGate is the mutating webhook that gives a pod being created
// lbregistrar's readiness gate (v1beta1.ReadinessGate, and
// v1beta1.ReadinessGateLabel, so the controller caches the pod) when an
// LBRegistrar registers a Service that selects it, and registers it for
// its pods (desired.GatesPods). It reads Services and LBRegistrars through
// reader (the manager's cache). Its configuration's failurePolicy is
// Ignore: whatever happens here, the pod is created.
func NewPodGate(reader client.Reader) *admission.Webhook {
	return &admission.Webhook{Handler: &podGate{reader: reader}}
}

type podGate struct{ reader client.Reader }

func (g *podGate) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create {
		return admission.Allowed("")
	}
	if len(req.Object.Raw) == 0 {
		return admission.Errored(http.StatusBadRequest, errors.New("the request carries no object"))
	}
	var pod corev1.Pod
	if err := kjson.UnmarshalCaseSensitivePreserveInts(req.Object.Raw, &pod); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if pod.Namespace == "" {
		pod.Namespace = req.Namespace // a pod of a ReplicaSet may come without it
	}
	if desired.HasGate(&pod) {
		return admission.Allowed("it has the readiness gate")
	}
	gated, err := registered(ctx, g.reader, &pod)
	switch {
	case err != nil:
		return admission.Allowed("").WithWarnings("lbregistrar could not tell whether a load balancer registers this pod, and gave it no readiness gate: " + err.Error())
	case !gated:
		return admission.Allowed("no LBRegistrar registers it")
	}
	mutated := pod.DeepCopy()
	mutated.Spec.ReadinessGates = append(mutated.Spec.ReadinessGates, corev1.PodReadinessGate{ConditionType: v1beta1.ReadinessGate})
	if mutated.Labels == nil {
		mutated.Labels = map[string]string{}
	}
	mutated.Labels[v1beta1.ReadinessGateLabel] = ""
	raw, err := json.Marshal(mutated)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	return admission.PatchResponseFromRaw(req.Object.Raw, raw)
}

// registered reports whether an LBRegistrar registers a Service that
// selects pod, for its pods.
func registered(ctx context.Context, reader client.Reader, pod *corev1.Pod) (bool, error) {
	var services corev1.ServiceList
	if err := reader.List(ctx, &services, client.InNamespace(pod.Namespace), client.UnsafeDisableDeepCopy); err != nil {
		return false, err
	}
	var selecting []*corev1.Service
	for i := range services.Items {
		s := &services.Items[i]
		if desired.Selects(s, pod) {
			selecting = append(selecting, s)
		}
	}
	if len(selecting) == 0 {
		return false, nil
	}
	var registrars v1beta1.LBRegistrarList
	if err := reader.List(ctx, &registrars, client.UnsafeDisableDeepCopy); err != nil {
		return false, err
	}
	for _, r := range registrars.Items {
		for _, t := range r.Spec.Services {
			for _, s := range selecting {
				if t.Namespace == s.Namespace && t.Name == s.Name && desired.GatesPods(&t, s) {
					return true, nil
				}
			}
		}
	}
	return false, nil
}
