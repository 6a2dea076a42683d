// Package lanes is the write path's serialization: one lane per load
// balancer, taken in turns by the resources that write it, each turn run as
// a flight that has the lane but no reconcile worker while it waits for
// OCI, and the wake-ups that enqueue a resource again when the lane or
// flight it parked behind is free. It also keeps what the resource with
// each lane is doing, for the debug view.
//
// It owns no Kubernetes object and calls no OCI API: what a turn does is
// that resource's business; lanes only orders the resources.
package lanes

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/peppy-ratio/lbregistrar/reconciler/metrics"
)

// Lanes serializes writes per load balancer inside the process: OCI runs
// one work request per load balancer at a time and answers a second one with
// 409, so resources sharing a load balancer take turns here instead of
// colliding there. Different load balancers have different lanes and
// proceed in parallel, bounded by the number of reconcile workers.
//
// A reconcile that finds its lane busy does not occupy a worker while it
// waits: it parks and returns, and is woken (enqueued again) when the lane
// is released, so many resources on one load balancer cannot starve the
// others. Whatever changed meanwhile is computed when it runs, so it is
// folded into that one write.
//
// Each lane also records who has it and what that resource is doing, for
// the debug view (Snapshot).
type Lanes struct {
	mu   sync.Mutex
	busy map[string]*lane
	now  func() time.Time
}

type lane struct {
	resource string
	since    time.Time
	step     Step
	parked   map[string]waiter // by resource name
}

type waiter struct {
	wake  func()
	since time.Time
}

// Phases of Step.
const (
	Reading    = "reading"    // the cluster view and the backend sets
	Writing    = "writing"    // UpdateBackendSet sent, no work request yet
	Waiting    = "waiting"    // for the work request of a write
	BackingOff = "backingOff" // before retrying a failed write
	// WaitingForOthers: for another writer's work request, after a 409.
	WaitingForOthers = "waitingForOthers"
)

// New returns lanes, all free.
func New() *Lanes {
	return &Lanes{busy: map[string]*lane{}, now: func() time.Time { return time.Now().UTC() }}
}

// Turn is a resource's turn on a load balancer's lane: while it lasts, that
// resource alone writes the load balancer. The resource reports its steps
// on it and releases it once, deferred, so a reconcile that panics (and is
// recovered by the controller) does not keep the load balancer from everyone
// else; a nil turn ignores steps (tests of the writer alone).
type Turn struct {
	lanes          *Lanes
	loadBalancerID string
	lane           *lane
}

// TryAcquire takes the load balancer's lane, or parks wake, once per
// resource, to be called when the lane is released.
func (l *Lanes) TryAcquire(loadBalancerID, resource string, wake func()) (*Turn, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if ln := l.busy[loadBalancerID]; ln != nil {
		// A resource is reconciled by one worker at a time, so its latest
		// caller is the one to wake; it has waited since it first parked.
		p, already := ln.parked[resource]
		if !already {
			metrics.PendingChanges.Inc()
			p.since = now
		}
		p.wake = wake
		ln.parked[resource] = p
		return nil, false
	}
	ln := &lane{resource: resource, since: now, step: Step{Phase: Reading, Since: now}, parked: map[string]waiter{}}
	l.busy[loadBalancerID] = ln
	return &Turn{lanes: l, loadBalancerID: loadBalancerID, lane: ln}, true
}

// LoadBalancerID is the load balancer the turn writes.
func (h *Turn) LoadBalancerID() string { return h.loadBalancerID }

// Step records what the resource with the lane does now.
func (h *Turn) Step(phase, backendSet, workRequest string) {
	if h == nil {
		return
	}
	h.lanes.mu.Lock()
	defer h.lanes.mu.Unlock()
	h.lane.step = Step{Phase: phase, BackendSet: backendSet, WorkRequest: workRequest, Since: h.lanes.now()}
}

// Release ends the turn: the lane is free, and every resource parked on
// it is woken.
func (h *Turn) Release() {
	l := h.lanes
	l.mu.Lock()
	delete(l.busy, h.loadBalancerID)
	l.mu.Unlock()
	metrics.PendingChanges.Sub(float64(len(h.lane.parked)))
	for _, p := range h.lane.parked {
		p.wake()
	}
}

// Wakeups enqueues the resources parked on a lane when it is released. It is
// a source of the controller, which starts it before any reconcile runs:
// Add on the work queue never blocks and queues a resource once however often
// it is woken, so a release delivers every wake at once and leaves nothing
// behind; once the manager stops, the shut-down queue drops them.
type Wakeups struct {
	mu    sync.Mutex
	queue workqueue.TypedRateLimitingInterface[reconcile.Request]
}

// Start implements source.Source.
func (w *Wakeups) Start(_ context.Context, queue workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.queue = queue
	return nil
}

// Wake enqueues the named resource now.
func (w *Wakeups) Wake(name string) {
	w.After(name, 0)
}

// After enqueues the named resource once d has passed.
func (w *Wakeups) After(name string, d time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.queue.AddAfter(reconcile.Request{NamespacedName: types.NamespacedName{Name: name}}, d)
}

// WakeKey enqueues the object key names (of a namespaced kind) at once;
// before the controller has started, when there is nothing to wake yet,
// it does nothing.
func (w *Wakeups) WakeKey(key types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.queue != nil {
		w.queue.Add(reconcile.Request{NamespacedName: key})
	}
}

// Step is what the resource with a lane is doing.
type Step struct {
	Phase       string    `json:"phase"` // Reading, Writing, Waiting, BackingOff or WaitingForOthers
	BackendSet  string    `json:"backendSet,omitempty"`
	WorkRequest string    `json:"workRequest,omitempty"`
	Since       time.Time `json:"since"`
}

// Status is one busy load balancer.
type Status struct {
	LoadBalancerID string    `json:"loadBalancerId"`
	LBRegistrar    string    `json:"lbregistrar"` // the LBRegistrar reconciling it
	TakenSince     time.Time `json:"takenSince"`
	Step           Step      `json:"step"`
	// Parked are the resources waiting for the lane, longest waiting first;
	// each is reconciled again when the resource with the lane releases it.
	Parked []Parked `json:"parked"`
}

// Parked is an LBRegistrar waiting for a busy lane.
type Parked struct {
	Name  string    `json:"name"`
	Since time.Time `json:"since"`
}

// Snapshot lists the busy lanes, by load balancer.
func (l *Lanes) Snapshot() []Status {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]Status, 0, len(l.busy))
	for id, ln := range l.busy {
		st := Status{LoadBalancerID: id, LBRegistrar: ln.resource, TakenSince: ln.since, Step: ln.step, Parked: []Parked{}}
		for name, p := range ln.parked {
			st.Parked = append(st.Parked, Parked{Name: name, Since: p.since})
		}
		slices.SortFunc(st.Parked, func(a, b Parked) int {
			if c := a.Since.Compare(b.Since); c != 0 {
				return c
			}
			return strings.Compare(a.Name, b.Name)
		})
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b Status) int { return strings.Compare(a.LoadBalancerID, b.LoadBalancerID) })
	return out
}
