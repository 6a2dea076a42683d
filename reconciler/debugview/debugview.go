// Package debugview is what the controller serves at Path on its metrics
// server for a person looking into it: which load balancers' lanes are
// taken and by whom, the departing nodes' drains and when they end, and
// under --dry-run the writes kept back. It only reads what the reconciler
// keeps; the ownership record is what counts.
package debugview

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

// Path is where the metrics server serves the View.
const Path = "/debug/lanes"

// View is what Path serves: every load balancer whose lane is taken, who
// has it and who waits for it. Only the elected leader reconciles, so
// another replica shows no lanes.
type View struct {
	Time          time.Time      `json:"time"`
	Leader        bool           `json:"leader"`
	LoadBalancers []lanes.Status `json:"loadBalancers"`
	// NodeDrains are the departing nodes' backends kept drained until the
	// node drain period is over, the first to end first.
	NodeDrains []NodeDrain `json:"nodeDrains"`
	// DryRun is set under serve --dry-run, which writes nothing to OCI;
	// PendingWrites are the writes it kept back, as the last reconcile of
	// each resource planned them.
	DryRun        bool                       `json:"dryRun,omitempty"`
	PendingWrites []preview.BackendSetChange `json:"pendingWrites,omitempty"`
}

// Sources are what the View is read from.
type Sources struct {
	Lanes   *lanes.Lanes
	Drains  *Drains
	Pending *preview.Pending // nil unless the controller runs dry
	Elected <-chan struct{}  // closed once this replica leads
}

// Handler serves the View as JSON.
func Handler(s Sources) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		view := View{Time: time.Now().UTC(), LoadBalancers: s.Lanes.Snapshot(), NodeDrains: s.Drains.Snapshot()}
		if s.Pending != nil {
			view.DryRun, view.PendingWrites = true, s.Pending.Snapshot()
		}
		select {
		case <-s.Elected:
			view.Leader = true
		default:
		}
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(view) // only a broken connection fails here
	})
}

// NodeDrain is a departing node's backend kept drained until Until, then
// removed, as the View lists it.
type NodeDrain struct {
	LBRegistrar    string    `json:"lbregistrar"`
	LoadBalancerID string    `json:"loadBalancerId"`
	BackendSet     string    `json:"backendSet"`
	Backend        string    `json:"backend"`
	Until          time.Time `json:"until"`
}

// Drains remembers the drains each resource's last sync of each backend
// set kept, for the View. The zero value is ready to use.
type Drains struct {
	mu sync.Mutex
	m  map[[2]string][]NodeDrain // by resource and backend set
}

// Set records what p keeps drained in a backend set, each drain lasting
// drainFor; a nil p, none.
func (d *Drains) Set(name, lb, backendSet string, p *plan.Plan, drainFor time.Duration) {
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
func (d *Drains) Forget(name string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for key := range d.m {
		if key[0] == name {
			delete(d.m, key)
		}
	}
}

// Snapshot lists every drain, the first to end first; an empty list, not
// nil, for none.
func (d *Drains) Snapshot() []NodeDrain {
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
