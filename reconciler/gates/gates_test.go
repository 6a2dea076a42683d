package gates

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
)

// The pod events that reach the LBRegistrars' reconciles are those their
// registration depends on; a pod just made, not ready yet, is not one: it
// would start a batch of endpoint changes before the change that matters;
// nor its gate opening: it stands registered as ready already. Its
// containers failing or ready again are, whatever the gate.
func TestGatedPodChangedPassesWhatRegistrationDependsOn(t *testing.T) {
	pod := func(containersReady bool) *corev1.Pod {
		status := corev1.ConditionFalse
		if containersReady {
			status = corev1.ConditionTrue
		}
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"},
			Spec:   corev1.PodSpec{ReadinessGates: []corev1.PodReadinessGate{{ConditionType: v1beta1.ReadinessGate}}},
			Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.ContainersReady, Status: status}}}}
	}
	deleting := pod(true)
	deleting.DeletionTimestamp = &metav1.Time{}
	withGate := func(p *corev1.Pod) *corev1.Pod {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: v1beta1.ReadinessGate, Status: corev1.ConditionTrue})
		return p
	}
	p := GatedPodChanged()
	for _, tt := range []struct {
		name string
		got  bool
		want bool
	}{
		{"made, not ready", p.Create(event.CreateEvent{Object: pod(false)}), false},
		{"listed ready, awaiting its gate", p.Create(event.CreateEvent{Object: pod(true)}), true},
		{"its containers became ready", p.Update(event.UpdateEvent{ObjectOld: pod(false), ObjectNew: pod(true)}), true},
		{"its containers stopped being ready", p.Update(event.UpdateEvent{ObjectOld: pod(true), ObjectNew: pod(false)}), true},
		{"its deletion began", p.Update(event.UpdateEvent{ObjectOld: pod(true), ObjectNew: deleting}), true},
		{"nothing that matters changed", p.Update(event.UpdateEvent{ObjectOld: pod(false), ObjectNew: pod(false)}), false},
		{"its gate opened", p.Update(event.UpdateEvent{ObjectOld: pod(true), ObjectNew: withGate(pod(true))}), false},
		{"its gate opened as its containers stopped being ready", p.Update(event.UpdateEvent{ObjectOld: pod(true), ObjectNew: withGate(pod(false))}), true},
		{"its gate open, its containers ready again", p.Update(event.UpdateEvent{ObjectOld: withGate(pod(false)), ObjectNew: withGate(pod(true))}), true},
		{"its gate open, its containers no longer ready", p.Update(event.UpdateEvent{ObjectOld: withGate(pod(true)), ObjectNew: withGate(pod(false))}), true},
		{"gone", p.Delete(event.DeleteEvent{Object: pod(true)}), true},
	} {
		if tt.got != tt.want {
			t.Errorf("%s: passed %t, want %t", tt.name, tt.got, tt.want)
		}
	}
}
