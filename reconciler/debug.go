package reconciler

import (
	"cmp"
	"encoding/json"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/peppy-ratio/lbregistrar/reconciler/lanes"
	"github.com/peppy-ratio/lbregistrar/reconciler/plan"
	"github.com/peppy-ratio/lbregistrar/reconciler/preview"
)

// DebugLanesPath is where the metrics server serves the lanes view.
const DebugLanesPath = "/debug/lanes"

// LanesView is what DebugLanesPath serves: every load balancer whose lane
// is taken, who holds it and who waits for it. Only the elected leader
// reconciles, so another replica shows no lanes.
type LanesView struct {
	Time          time.Time      `json:"time"`
	Leader        bool           `json:"leader"`
	LoadBalancers []lanes.Status `json:"loadBalancers"`
	// NodeDrains are the departing nodes' backends kept drained until the
	// node drain period is over, the first to end first.
	NodeDrains []NodeDrain `json:"nodeDrains"`
	// DryRun is set under serve --dry-run, which writes nothing to OCI;
	// PendingWrites are the writes it held back, as the last reconcile of
	// each resource planned them.
	DryRun        bool                       `json:"dryRun,omitempty"`
	PendingWrites []preview.BackendSetChange `json:"pendingWrites,omitempty"`
}

// serveLanes serves the LanesView as JSON.
func (r *Reconciler) serveLanes(w http.ResponseWriter, _ *http.Request) {
	view := LanesView{Time: time.Now().UTC(), LoadBalancers: r.lanes.Snapshot(), NodeDrains: r.drains.snapshot()}
	if r.opts.DryRun {
		view.DryRun, view.PendingWrites = true, r.pending.Snapshot()
	}
	select {
	case <-r.elected:
		view.Leader = true
	default:
	}
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(view) // only a broken connection fails here
}

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
