package reconciler

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"time"
)

// DebugLanesPath is where the metrics server serves the lanes view.
const DebugLanesPath = "/debug/lanes"

// LanesView is what DebugLanesPath serves: every load balancer whose lane
// is taken, who holds it and who waits for it. Only the elected leader
// reconciles, so another replica shows no lanes.
type LanesView struct {
	Time          time.Time    `json:"time"`
	Leader        bool         `json:"leader"`
	LoadBalancers []LaneStatus `json:"loadBalancers"`
	// NodeDrains are the departing nodes' backends kept drained until the
	// node drain period is over, the first to end first.
	NodeDrains []NodeDrain `json:"nodeDrains"`
	// DryRun is set under serve --dry-run, which writes nothing to OCI;
	// PendingWrites are the writes it held back, as the last reconcile of
	// each resource planned them.
	DryRun        bool               `json:"dryRun,omitempty"`
	PendingWrites []BackendSetChange `json:"pendingWrites,omitempty"`
}

// LaneStatus is one busy load balancer.
type LaneStatus struct {
	LoadBalancerID string    `json:"loadBalancerId"`
	Holder         string    `json:"holder"` // the LBRegistrar reconciling it
	HeldSince      time.Time `json:"heldSince"`
	Step           LaneStep  `json:"step"`
	// Parked are the resources waiting for the lane, longest waiting first;
	// each is reconciled again when the holder releases it.
	Parked []ParkedResource `json:"parked"`
}

// ParkedResource is an LBRegistrar waiting for a busy lane.
type ParkedResource struct {
	Name  string    `json:"name"`
	Since time.Time `json:"since"`
}

// snapshot lists the busy lanes, by load balancer.
func (l *lanes) snapshot() []LaneStatus {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]LaneStatus, 0, len(l.busy))
	for id, ln := range l.busy {
		st := LaneStatus{LoadBalancerID: id, Holder: ln.holder, HeldSince: ln.since, Step: ln.step, Parked: []ParkedResource{}}
		for name, p := range ln.parked {
			st.Parked = append(st.Parked, ParkedResource{Name: name, Since: p.since})
		}
		slices.SortFunc(st.Parked, func(a, b ParkedResource) int {
			if c := a.Since.Compare(b.Since); c != 0 {
				return c
			}
			return strings.Compare(a.Name, b.Name)
		})
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b LaneStatus) int { return strings.Compare(a.LoadBalancerID, b.LoadBalancerID) })
	return out
}

// serveLanes serves the LanesView as JSON.
func (r *Reconciler) serveLanes(w http.ResponseWriter, _ *http.Request) {
	view := LanesView{Time: r.lanes.now(), LoadBalancers: r.lanes.snapshot(), NodeDrains: r.drains.snapshot()}
	if r.opts.DryRun {
		view.DryRun, view.PendingWrites = true, r.pending.snapshot()
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
