package reconciler

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/reconciler/backendset"
)

// When a deleted resource's drain is over: its period after the drain's
// work request ended (or after now, while its outcome is not known), never
// before the period after the deletion, and never starting later than the
// work request timeout after the deletion, whatever the record says.
func TestDrainEnds(t *testing.T) {
	deleted := time.Now().Add(-time.Hour).Truncate(time.Second) // "now" is past the work request timeout
	r := &Reconciler{opts: Options{DrainPeriod: 30 * time.Second, WorkRequestTimeout: 10 * time.Minute}}
	at := func(d time.Duration) metav1.Time { return metav1.NewTime(deleted.Add(d)) }
	set := func(drained bool, wr *v1beta1.WorkRequest) v1beta1.BackendSetStatus {
		return v1beta1.BackendSetStatus{Name: "s", Drained: drained, LastWorkRequest: wr}
	}
	for _, tc := range []struct {
		name string
		sets []v1beta1.BackendSetStatus
		want time.Time
	}{
		{name: "not drained yet", sets: []v1beta1.BackendSetStatus{set(false, &v1beta1.WorkRequest{Status: backendset.WorkRequestSucceeded, Time: at(-time.Hour)})},
			want: deleted.Add(30 * time.Second)},
		{name: "drained by a work request that ended 40 s after the deletion",
			sets: []v1beta1.BackendSetStatus{set(true, &v1beta1.WorkRequest{Status: backendset.WorkRequestSucceeded, Time: at(40 * time.Second)})},
			want: deleted.Add(70 * time.Second)},
		{name: "the latest of several drains", sets: []v1beta1.BackendSetStatus{
			set(true, &v1beta1.WorkRequest{Status: backendset.WorkRequestSucceeded, Time: at(40 * time.Second)}),
			set(true, &v1beta1.WorkRequest{Status: backendset.WorkRequestSucceeded, Time: at(80 * time.Second)}),
		}, want: deleted.Add(110 * time.Second)},
		{name: "a failed drain does not move it", sets: []v1beta1.BackendSetStatus{set(true, &v1beta1.WorkRequest{Status: backendset.WorkRequestFailed, Time: at(time.Minute)})},
			want: deleted.Add(30 * time.Second)},
		{name: "a record older than the deletion does not shorten it",
			sets: []v1beta1.BackendSetStatus{set(true, &v1beta1.WorkRequest{Status: backendset.WorkRequestSucceeded, Time: at(-time.Hour)})},
			want: deleted.Add(30 * time.Second)},
		{name: "a record far in the future is bounded by the work request timeout",
			sets: []v1beta1.BackendSetStatus{set(true, &v1beta1.WorkRequest{Status: backendset.WorkRequestSucceeded, Time: at(1000 * time.Hour)})},
			want: deleted.Add(10*time.Minute + 30*time.Second)},
		{name: "a drain whose outcome is not known counts from now, bounded",
			sets: []v1beta1.BackendSetStatus{set(true, &v1beta1.WorkRequest{Status: backendset.WorkRequestAccepted, Time: at(0)})},
			want: deleted.Add(10*time.Minute + 30*time.Second)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := &v1beta1.LBRegistrar{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &metav1.Time{Time: deleted}},
				Status: v1beta1.LBRegistrarStatus{BackendSets: tc.sets}}
			if got := r.drainEnds(obj); !got.Equal(tc.want) {
				t.Errorf("drainEnds = %s, want %s", got, tc.want)
			}
		})
	}
}
