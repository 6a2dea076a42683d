package lanes

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime/debug"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/peppy-ratio/lbregistrar/reconciler/metrics"
)

// Flights runs the part of a reconcile that holds a load balancer's lane
// (reading its backend sets, writing them, waiting for each work request,
// recording the outcome) in a goroutine of its own, so the reconcile worker
// is free as soon as the lane is taken. OCI work requests take tens of
// seconds; a worker held through them would make --reconcile-workers, not
// the OCI rate limit, the bound on how many load balancers converge at once.
// A flight holds one lane, so there are never more flights than load
// balancers being written.
//
// A resource has at most one flight: a reconcile of a resource whose flight
// is in the air parks and is woken when it lands, as a reconcile parks on a
// busy lane, so one resource still has one actor at a time. What a flight
// ends with is what its reconcile would have returned: a requeue after the
// resync period, or after a backoff that grows while flights of the resource
// keep failing (the workqueue's own backoff is reset each time a reconcile
// hands over to a flight).
//
// At shutdown (or loss of leadership) the flights' context is cancelled and
// the manager waits for them: a write under way is still waited for and
// recorded (ShutdownWait), as when it ran in the reconcile.
type Flights struct {
	ctx    context.Context // outlives reconciles; cancelled at shutdown
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	airborne map[string][]func() // resource -> wakes of reconciles parked behind its flight
	grounded bool                // shutting down: no flight starts

	backoff workqueue.TypedRateLimiter[string]
	requeue func(name string, after time.Duration)
}

// NewFlights returns flights whose landing schedules the resource's next
// reconcile with requeue.
func NewFlights(requeue func(name string, after time.Duration)) *Flights {
	ctx, cancel := context.WithCancel(context.Background())
	return &Flights{
		ctx: ctx, cancel: cancel, airborne: map[string][]func(){},
		// The controller's own per-item backoff, which a flight's failure
		// would otherwise not reach.
		backoff: workqueue.NewTypedItemExponentialFailureRateLimiter[string](FailureBackoffBase, FailureBackoffMax),
		requeue: requeue,
	}
}

// The per-resource backoff after a failed reconcile or flight: the
// controller's workqueue and Flights use the same.
const (
	FailureBackoffBase = 200 * time.Millisecond
	FailureBackoffMax  = 5 * time.Minute
)

// ParkBehind reports whether name has a flight in the air; if so, wake is
// called when it lands.
func (f *Flights) ParkBehind(name string, wake func()) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	wakes, flying := f.airborne[name]
	if flying {
		f.airborne[name] = append(wakes, wake)
	}
	return flying
}

// Awaited reports whether a reconcile of name is parked behind its flight:
// one will run as soon as the flight lands.
func (f *Flights) Awaited(name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.airborne[name]) > 0
}

// Launch runs fly for name on its turn of the lane, which it releases when
// done. ctx carries the reconcile's logger; its cancellation does not reach
// the flight, which ends with the flights' context.
func (f *Flights) Launch(ctx context.Context, name string, turn *Turn, fly func(context.Context) (ctrl.Result, error)) {
	logger := log.FromContext(ctx)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.grounded {
		// The manager is stopping: the next leader does this reconcile.
		logger.V(1).Info("shutting down; the write is left to the next leader")
		turn.Release()
		return
	}
	f.airborne[name] = nil
	metrics.Flights.Inc()
	f.wg.Go(func() {
		var res ctrl.Result
		var err error
		defer func() {
			// A panic ends the flight as it would a reconcile, which
			// controller-runtime recovers: the lane is released and the
			// resource retried, not the process lost.
			if p := recover(); p != nil {
				err = fmt.Errorf("panic: %v", p)
				logger.Error(err, "flight panicked", "stack", string(debug.Stack()))
			}
			turn.Release()
			f.land(logger, name, res, err)
			metrics.Flights.Dec()
		}()
		res, err = fly(log.IntoContext(f.ctx, logger))
	})
}

// land schedules name's next reconcile by how its flight ended, and wakes
// the reconciles parked behind it.
func (f *Flights) land(logger logr.Logger, name string, res ctrl.Result, err error) {
	f.mu.Lock()
	wakes := f.airborne[name]
	delete(f.airborne, name)
	f.mu.Unlock()
	switch {
	case err != nil:
		logger.Error(err, "Reconciler error")
		// Jittered: flights that failed together (an API server too busy
		// for their status writes) are not to retry together.
		after := f.backoff.When(name)
		f.requeue(name, after+rand.N(after/2+1))
	default:
		f.backoff.Forget(name)
		if res.RequeueAfter > 0 {
			f.requeue(name, res.RequeueAfter)
		}
	}
	for _, wake := range wakes {
		wake()
	}
}

// Wait blocks until every flight has landed.
func (f *Flights) Wait() { f.wg.Wait() }

// Start implements manager.Runnable: it keeps the manager from stopping
// until the flights have landed, after cancelling them when ctx ends.
func (f *Flights) Start(ctx context.Context) error {
	<-ctx.Done()
	f.mu.Lock()
	f.grounded = true // before waiting, so no flight starts while the manager waits
	f.mu.Unlock()
	f.cancel()
	f.Wait()
	return nil
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: flights
// exist only on the leader, and the lease is released after they land.
func (f *Flights) NeedLeaderElection() bool { return true }
