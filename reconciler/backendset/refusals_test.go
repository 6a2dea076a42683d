package backendset

import (
	"errors"
	"testing"
	"time"
)

func TestRefusals(t *testing.T) {
	now := time.Unix(1000, 0)
	refused := errors.New("400 InvalidParameter")
	first, last := time.Second, 5*time.Second
	var r Refusals

	if got := r.InForce("web", "bs", 1, []string{"a"}, now); got != nil {
		t.Fatalf("nothing refused yet, got %+v", got)
	}
	// Each refusal of the same additions in a row doubles the wait, up to last.
	for i, want := range []time.Duration{first, 2 * first, 4 * first, last, last} {
		if got := r.Put("web", "bs", 1, []string{"a"}, refused, now, first, last); got != now.Add(want) {
			t.Fatalf("refusal %d: retry at +%v, want +%v", i+1, got.Sub(now), want)
		}
	}
	rej := r.InForce("web", "bs", 1, []string{"a"}, now)
	if rej == nil || !errors.Is(rej.Err, refused) || rej.RetryAt != now.Add(last) {
		t.Fatalf("in force = %+v, want the refusal until +%v", rej, last)
	}
	for name, tc := range map[string]struct {
		resource, backendSet string
		generation           int64
		adds                 []string
		at                   time.Time
	}{
		"retry due":         {"web", "bs", 1, []string{"a"}, now.Add(last)},
		"new spec":          {"web", "bs", 2, []string{"a"}, now},
		"other additions":   {"web", "bs", 1, []string{"a", "b"}, now},
		"other backend set": {"web", "other", 1, []string{"a"}, now},
		"other resource":    {"api", "bs", 1, []string{"a"}, now},
	} {
		if got := r.InForce(tc.resource, tc.backendSet, tc.generation, tc.adds, tc.at); got != nil {
			t.Errorf("%s: in force, want tried at once", name)
		}
	}
	// Other additions start the backoff again.
	if got := r.Put("web", "bs", 1, []string{"b"}, refused, now, first, last); got != now.Add(first) {
		t.Fatalf("other additions: retry at +%v, want +%v", got.Sub(now), first)
	}
	r.Clear("web", "bs")
	if got := r.InForce("web", "bs", 1, []string{"b"}, now); got != nil {
		t.Fatalf("cleared, still in force: %+v", got)
	}
	r.Put("web", "bs", 1, []string{"a"}, refused, now, first, last)
	r.Forget("web")
	if got := r.InForce("web", "bs", 1, []string{"a"}, now); got != nil {
		t.Fatalf("forgotten, still in force: %+v", got)
	}
}
