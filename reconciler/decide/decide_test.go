package decide

import (
	"testing"
	"time"

	"github.com/peppy-ratio/lbregistrar/reconciler/plan"
)

// DrainFor answers from plan.Policy with serve's periods.
func TestDrainFor(t *testing.T) {
	o := Options{NodeDrainPeriod: 70 * time.Second, DrainPeriod: 30 * time.Second}
	for why, want := range map[plan.Leaving]time.Duration{
		plan.NodeDeparted:        70 * time.Second,
		plan.TargetRemoved:       70 * time.Second,
		plan.LoadBalancerChanged: 30 * time.Second,
		plan.ResourceDeleted:     30 * time.Second,
		plan.Readdressed:         0,
		plan.DeletedOrphaning:    0,
	} {
		if got := o.DrainFor(why); got != want {
			t.Errorf("DrainFor(%d) = %s, want %s", why, got, want)
		}
	}
	if got := (Options{}).DrainFor(plan.TargetRemoved); got != 0 {
		t.Errorf("without periods: %s, want removal at once", got)
	}
}
