package reconciler

import (
	"context"
	"sync"

	"github.com/peppy-ratio/lbregistrar/reconciler/metrics"
)

// lanes serializes writes per load balancer inside the process: OCI runs
// one work request per load balancer at a time and answers a second one with
// 409, so resources sharing a load balancer take turns here instead of
// colliding there. Different load balancers have different lanes and
// proceed in parallel, bounded by the number of reconcile workers.
//
// A reconcile that finds its lane busy does not hold a worker while it
// waits: it parks and returns, and is woken (enqueued again) when the lane
// is released, so many resources on one load balancer cannot starve the
// others. Whatever changed meanwhile is computed when it runs, so it is
// folded into that one write.
type lanes struct {
	mu   sync.Mutex
	busy map[string]*lane
}

type lane struct {
	parked map[string]func() // resource name -> wake-up
}

func newLanes() *lanes { return &lanes{busy: map[string]*lane{}} }

// tryAcquire takes the load balancer's lane and returns its release, or
// parks wake, once per resource, to be called when the lane is released.
func (l *lanes) tryAcquire(loadBalancerID, resource string, wake func()) (release func(), ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ln := l.busy[loadBalancerID]; ln != nil {
		// A resource is reconciled by one worker at a time, so its latest
		// caller is the one to wake.
		if _, parked := ln.parked[resource]; !parked {
			metrics.PendingChanges.Inc()
		}
		ln.parked[resource] = wake
		return nil, false
	}
	l.busy[loadBalancerID] = &lane{parked: map[string]func(){}}
	return func() { l.release(loadBalancerID) }, true
}

func (l *lanes) release(loadBalancerID string) {
	l.mu.Lock()
	ln := l.busy[loadBalancerID]
	delete(l.busy, loadBalancerID)
	l.mu.Unlock()
	metrics.PendingChanges.Sub(float64(len(ln.parked)))
	for _, wake := range ln.parked {
		wake()
	}
}

// acquire waits for the lane; for paths that must finish in one go (deletion).
func (l *lanes) acquire(ctx context.Context, loadBalancerID, resource string) (func(), error) {
	for {
		woken := make(chan struct{})
		release, ok := l.tryAcquire(loadBalancerID, resource, func() { close(woken) })
		if ok {
			return release, nil
		}
		select {
		case <-woken:
		case <-ctx.Done():
			l.unpark(loadBalancerID, resource)
			return nil, ctx.Err()
		}
	}
}

func (l *lanes) unpark(loadBalancerID, resource string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ln := l.busy[loadBalancerID]; ln != nil {
		if _, parked := ln.parked[resource]; parked {
			delete(ln.parked, resource)
			metrics.PendingChanges.Dec()
		}
	}
}
