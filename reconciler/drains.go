package reconciler

import (
	"cmp"
	"slices"
	"sync"
	"time"

	"github.com/peppy-ratio/lbregistrar/reconciler/plan"
)

// NodeDrain is a departing node's backend kept drained until Until, then
// removed, as DebugLanesPath lists it.
type NodeDrain struct {
	LBRegistrar    string    `json:"lbregistrar"`
	LoadBalancerID string    `json:"loadBalancerId"`
	BackendSet     string    `json:"backendSet"`
	Backend        string    `json:"backend"`
	Until          time.Time `json:"until"`
}

// drains remembers the drains each resource's last sync of each backend
// set kept, for the debug view; the ownership record is what counts.
type drains struct {
	mu sync.Mutex
	m  map[[2]string][]NodeDrain // by resource and backend set
}

// set records what p keeps drained in a backend set, each drain lasting drainFor.
func (d *drains) set(name, lb, backendSet string, p *plan.Plan, drainFor time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	key := [2]string{name, backendSet}
	if p == nil || len(p.Draining) == 0 {
		delete(d.m, key)
		return
	}
	if d.m == nil {
		d.m = map[[2]string][]NodeDrain{}
	}
	list := make([]NodeDrain, 0, len(p.Draining))
	for _, b := range p.Draining {
		list = append(list, NodeDrain{name, lb, backendSet, plan.Key(b.IP, b.Port), b.Since.Add(drainFor)})
	}
	d.m[key] = list
}

// Forget drops a resource that is gone.
func (d *drains) Forget(name string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for key := range d.m {
		if key[0] == name {
			delete(d.m, key)
		}
	}
}

// snapshot lists every drain, the first to end first; an empty list, not
// nil, for none.
func (d *drains) snapshot() []NodeDrain {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := []NodeDrain{}
	for _, list := range d.m {
		out = append(out, list...)
	}
	slices.SortFunc(out, func(a, b NodeDrain) int {
		return cmp.Or(a.Until.Compare(b.Until), cmp.Compare(a.LBRegistrar, b.LBRegistrar), cmp.Compare(a.BackendSet, b.BackendSet), cmp.Compare(a.Backend, b.Backend))
	})
	return out
}
