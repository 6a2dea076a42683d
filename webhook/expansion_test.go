package webhook

import (
	goruntime "runtime"
	"slices"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/peppy-ratio/lbregistrar/api/v1alpha1"
	"github.com/peppy-ratio/lbregistrar/test/forge"
)

// A compressed conversion annotation that a write may not carry is refused
// without being expanded, on create, on update and on a status write, while
// the rest of the write is still checked: a forged value that would expand
// to 4 MiB costs a fraction of that.
func TestForgedCompressedAnnotationIsRefusedUnread(t *testing.T) {
	stored := alphaObject("stored", "set-a")
	forged := stored.DeepCopy()
	forged.Annotations = map[string]string{v1alpha1.HubDataAnnotation: forge.HubData()}
	badWeight := forged.DeepCopy()
	badWeight.Spec.Weight = 1000
	h := handlers(t)
	hubData := "metadata.annotations[" + v1alpha1.HubDataAnnotation + "]"
	for name, tc := range map[string]struct {
		body   []byte
		causes []string
	}{
		"create":                        {review(t, admissionv1.Create, forged, nil), []string{hubData}},
		"create that breaks a rule too": {review(t, admissionv1.Create, badWeight, nil), []string{hubData, "spec.weight"}},
		"update":                        {review(t, admissionv1.Update, forged, stored), []string{hubData}},
		"status write":                  {statusReviewBy(t, writer, forged, stored), []string{hubData}},
	} {
		t.Run(name, func(t *testing.T) {
			var before, after goruntime.MemStats
			goruntime.GC()
			goruntime.ReadMemStats(&before)
			resp := send(t, h, ValidateV1alpha1Path, tc.body)
			goruntime.ReadMemStats(&after)
			if resp.Allowed {
				t.Fatal("allowed")
			}
			if got := causeFields(resp); !slices.Equal(got, tc.causes) {
				t.Errorf("causes = %q, want %q", got, tc.causes)
			}
			if allocated, limit := after.TotalAlloc-before.TotalAlloc, uint64(1<<20); allocated > limit {
				t.Errorf("refusing a review of %d bytes allocated %d bytes, want at most %d", len(tc.body), allocated, limit)
			}
		})
	}
}
