package reconciler

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/peppy-ratio/lbregistrar/reconciler/lanes"
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
