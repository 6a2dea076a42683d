package backendset

import (
	"slices"
	"testing"
)

// Backend sets wait in the order they began to; each keeps its place while
// its count changes, and the room ahead of one is what those before it
// wait for (all of it, for one not waiting).
func TestWaitersKeepTheirPlace(t *testing.T) {
	var w Waiters
	w.Set("lb", "a", "api", 2)
	w.Set("lb", "b", "web", 1)
	w.Set("other", "c", "web", 5)
	w.Set("lb", "a", "api", 1) // keeps its place
	for _, tt := range []struct {
		resource, set string
		ahead         int
	}{{"a", "api", 0}, {"b", "web", 1}, {"d", "new", 2}} {
		if got := w.Ahead("lb", tt.resource, tt.set); got != tt.ahead {
			t.Errorf("ahead of %s/%s: %d, want %d", tt.resource, tt.set, got, tt.ahead)
		}
	}
	if got := w.Of("lb"); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("waiting on lb: %v", got)
	}
	w.Set("lb", "a", "api", 0)
	if got := w.Ahead("lb", "b", "web"); got != 0 {
		t.Errorf("a done, ahead of b: %d", got)
	}
	w.Forget("b")
	w.Forget("c")
	if w.Of("lb") != nil || w.Of("other") != nil || len(w.by) != 0 {
		t.Errorf("after forgetting: %v", w.by)
	}
}
