package decide

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/api/validation"
	"github.com/peppy-ratio/lbregistrar/reconciler/plan"
	"github.com/peppy-ratio/lbregistrar/reconciler/status"
)

func TestClaimHolder(t *testing.T) {
	at := func(sec int64) metav1.Time { return metav1.NewTime(time.Unix(sec, 0)) }
	lbr := func(name string, created metav1.Time, replaces string) *v1beta1.LBRegistrar {
		o := &v1beta1.LBRegistrar{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: created}}
		if replaces != "" {
			o.Annotations = map[string]string{validation.ReplacesAnnotation: replaces}
		}
		return o
	}
	first, second := lbr("first", at(10), ""), lbr("second", at(20), "")
	tests := []struct {
		name      string
		claimants []*v1beta1.LBRegistrar
		want      string
	}{
		{"older keeps it", []*v1beta1.LBRegistrar{second, first}, "first"},
		{"same second: name decides", []*v1beta1.LBRegistrar{lbr("b", at(10), ""), lbr("a", at(10), "")}, "a"},
		{"replacement takes over", []*v1beta1.LBRegistrar{first, lbr("merged", at(30), "first")}, "merged"},
		// merged precedes first (replaces it), first precedes second (older),
		// second precedes merged (older): still exactly one holder.
		{"no cycle deadlock", []*v1beta1.LBRegistrar{lbr("merged", at(30), "first"), second, first}, "merged"},
		{"not yet created is newest", []*v1beta1.LBRegistrar{lbr("new", metav1.Time{}, ""), second}, "second"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := holderOf(tc.claimants); got.Name != tc.want {
				t.Fatalf("holder = %s, want %s", got.Name, tc.want)
			}
			// Whatever order a resource lists them in, the holder is the same.
			reversed := make([]*v1beta1.LBRegistrar, len(tc.claimants))
			for i, c := range tc.claimants {
				reversed[len(reversed)-1-i] = c
			}
			if got := holderOf(reversed); got.Name != tc.want {
				t.Fatalf("holder in reverse order = %s, want %s", got.Name, tc.want)
			}
		})
	}
}

func TestProtect(t *testing.T) {
	owning := func(name string, deleting bool, backends ...v1beta1.Backend) v1beta1.LBRegistrar {
		o := v1beta1.LBRegistrar{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if deleting {
			o.DeletionTimestamp = &metav1.Time{Time: time.Unix(100, 0)}
		}
		status.Entry(&o, "web").SetOwned(backends)
		return o
	}
	a, b := v1beta1.Backend{IP: "10.0.0.1", Port: 30080, Weight: 1}, v1beta1.Backend{IP: "10.0.0.2", Port: 30080, Weight: 1}
	broken := errors.New("index unavailable")
	tests := []struct {
		name      string
		claimants Claimants
		want      map[string]bool
		wantErr   error
	}{
		{"none", func(string, string) ([]v1beta1.LBRegistrar, error) { return nil, nil }, map[string]bool{}, nil},
		{"what live claimants record", func(string, string) ([]v1beta1.LBRegistrar, error) {
			return []v1beta1.LBRegistrar{owning("x", false, a), owning("y", false, b)}, nil
		}, map[string]bool{"10.0.0.1:30080": true, "10.0.0.2:30080": true}, nil},
		{"a deleting claimant protects nothing", func(string, string) ([]v1beta1.LBRegistrar, error) {
			return []v1beta1.LBRegistrar{owning("x", true, a), owning("y", false, b)}, nil
		}, map[string]bool{"10.0.0.2:30080": true}, nil},
		{"claimants unreadable: not written", func(string, string) ([]v1beta1.LBRegistrar, error) { return nil, broken }, nil, broken},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			jobs := []Job{{Name: "web", Mode: plan.Apply}}
			var out status.Outcome
			protect(tc.claimants, "lb", jobs, &out)
			if diff := cmp.Diff(tc.want, jobs[0].Protected); diff != "" {
				t.Errorf("Protected (-want +got):\n%s", diff)
			}
			if !errors.Is(jobs[0].Err, tc.wantErr) {
				t.Errorf("Err = %v, want %v", jobs[0].Err, tc.wantErr)
			}
			if failed := len(out.Failures) > 0; failed != (tc.wantErr != nil) {
				t.Errorf("out.Failures = %q, want a failure: %v", out.Failures, tc.wantErr != nil)
			}
		})
	}
}
