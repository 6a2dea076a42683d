package decide

import (
	"testing"
	"time"
)

// DrainFor is the one place that says how long a backend leaving for each
// reason is drained (docs/reconciler.md, "When a backend leaves").
func TestDrainFor(t *testing.T) {
	o := Options{NodeDrainPeriod: 70 * time.Second, DrainPeriod: 30 * time.Second}
	for why, want := range map[Leaving]time.Duration{
		NodeDeparted:        70 * time.Second,
		EntryRemoved:        70 * time.Second,
		LoadBalancerChanged: 30 * time.Second,
		ResourceDeleted:     30 * time.Second,
	} {
		if got := o.DrainFor(why); got != want {
			t.Errorf("DrainFor(%d) = %s, want %s", why, got, want)
		}
	}
	if got := (Options{}).DrainFor(EntryRemoved); got != 0 {
		t.Errorf("without periods: %s, want removal at once", got)
	}
}
