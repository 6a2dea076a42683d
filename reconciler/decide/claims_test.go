package decide

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/api/validation"
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
