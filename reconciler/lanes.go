package reconciler

import (
	"context"
	"sync"

	"github.com/peppy-ratio/lbregistrar/reconciler/metrics"
)

// lanes serializes writes per load balancer inside the process: OCI runs
// one work request per load balancer at a time and answers a second one with
// 409, so two resources sharing a load balancer take turns here instead of
// colliding there. Different load balancers have different lanes and
// proceed in parallel, bounded by the number of reconcile workers.
type lanes struct {
	mu sync.Mutex
	m  map[string]*lane
}

type lane struct {
	slot  chan struct{} // holds a token while someone writes
	users int           // holders and waiters; the lane is dropped at zero
}

func newLanes() *lanes { return &lanes{m: map[string]*lane{}} }

// acquire waits for the load balancer's lane and returns its release.
func (l *lanes) acquire(ctx context.Context, loadBalancerID string) (func(), error) {
	l.mu.Lock()
	ln := l.m[loadBalancerID]
	if ln == nil {
		ln = &lane{slot: make(chan struct{}, 1)}
		l.m[loadBalancerID] = ln
	}
	ln.users++
	l.mu.Unlock()

	select {
	case ln.slot <- struct{}{}:
	default:
		metrics.PendingChanges.Inc()
		select {
		case ln.slot <- struct{}{}:
			metrics.PendingChanges.Dec()
		case <-ctx.Done():
			metrics.PendingChanges.Dec()
			l.leave(loadBalancerID, ln)
			return nil, ctx.Err()
		}
	}
	return func() {
		<-ln.slot
		l.leave(loadBalancerID, ln)
	}, nil
}

func (l *lanes) leave(loadBalancerID string, ln *lane) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ln.users--
	if ln.users == 0 {
		delete(l.m, loadBalancerID)
	}
}
