package v1alpha1

import (
	"slices"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
)

// ReasonLegacyPhase marks a Ready condition made from a v1alpha1 phase that
// is none of the three the original operator wrote; the phase is its message.
const ReasonLegacyPhase = "LegacyPhase"

// StatusFromPhase is the v1beta1 status a v1alpha1 phase stands for. The
// condition's transition time is the object's creation, the only time a
// phase carries, so the result is the same on every call.
func StatusFromPhase(phase Phase, created metav1.Time) v1beta1.LBRegistrarStatus {
	if phase == "" {
		return v1beta1.LBRegistrarStatus{}
	}
	if created.IsZero() {
		created = metav1.Unix(0, 0) // lastTransitionTime is required by the schema
	}
	ready := metav1.Condition{Type: v1beta1.ConditionReady, LastTransitionTime: created}
	switch phase {
	case PhaseReady:
		ready.Status, ready.Reason = metav1.ConditionTrue, v1beta1.ReasonRegistered
	case PhaseRegistering:
		ready.Status, ready.Reason = metav1.ConditionFalse, v1beta1.ReasonRegistering
	case PhasePending:
		ready.Status, ready.Reason = metav1.ConditionFalse, v1beta1.ReasonPending
	default:
		ready.Status, ready.Reason, ready.Message = metav1.ConditionUnknown, ReasonLegacyPhase, string(phase)
	}
	return v1beta1.LBRegistrarStatus{Conditions: []metav1.Condition{ready}}
}

// withPhase is conditions with Ready replaced by the one phase stands for
// (none for no phase), the others as they are.
func withPhase(conditions []metav1.Condition, phase Phase, created metav1.Time) []metav1.Condition {
	out := slices.DeleteFunc(slices.Clone(conditions), func(c metav1.Condition) bool { return c.Type == v1beta1.ConditionReady })
	return append(out, StatusFromPhase(phase, created).Conditions...)
}

// PhaseFromConditions is the v1alpha1 phase that conditions stand for:
// READY when Ready is True, REGISTERING while a write is under way, PENDING
// otherwise, and no phase before any Ready condition exists.
func PhaseFromConditions(conditions []metav1.Condition) Phase {
	ready := meta.FindStatusCondition(conditions, v1beta1.ConditionReady)
	switch {
	case ready == nil:
		return ""
	case ready.Reason == ReasonLegacyPhase:
		return Phase(ready.Message)
	case ready.Status == metav1.ConditionTrue:
		return PhaseReady
	case ready.Reason == v1beta1.ReasonRegistering:
		return PhaseRegistering
	default:
		return PhasePending
	}
}
