package lanes

import (
	"context"
	"errors"
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

// Flights runs the part of a reconcile that has a load balancer's lane
// (reading its backend sets, writing them, waiting for each work request,
// recording the outcome) in a goroutine of its own, so the reconcile worker
// is free as soon as the lane is taken. OCI work requests take tens of
// seconds; a worker occupied through them would make --reconcile-workers, not
// the OCI rate limit, the bound on how many load balancers converge at once.
// A flight has one lane, so there are never more flights than load
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
//
// Since the reconcile has returned by then, controller-runtime's metrics
// never see how a flight ends; it is observed in metrics.FlightDuration by
// result, and the oldest flight in the air in metrics.OldestFlightStart.
type Flights struct {
	ctx    context.Context // outlives reconciles; cancelled at shutdown
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	airborne map[string]*flight // by resource
	grounded bool               // shutting down: no flight starts

	backoff workqueue.TypedRateLimiter[string]
	requeue func(name string, after time.Duration)
}

// A flight is one resource's write in the air.
type flight struct {
	launched time.Time
	wakes    []func() // of the reconciles parked behind it
}

// NewFlights returns flights whose landing schedules the resource's next
// reconcile with requeue.
func NewFlights(requeue func(name string, after time.Duration)) *Flights {
	ctx, cancel := context.WithCancel(context.Background())
	return &Flights{
		ctx: ctx, cancel: cancel, airborne: map[string]*flight{},
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
	fl := f.airborne[name]
	if fl != nil {
		fl.wakes = append(fl.wakes, wake)
	}
	return fl != nil
}

// Awaited reports whether a reconcile of name is parked behind its flight:
// one will run as soon as the flight lands.
func (f *Flights) Awaited(name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	fl := f.airborne[name]
	return fl != nil && len(fl.wakes) > 0
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
	fl := &flight{launched: time.Now()}
	f.airborne[name] = fl
	f.showOldest()
	metrics.Flights.Inc()
	f.wg.Go(func() {
		var res ctrl.Result
		var err error
		defer func() {
			// A panic ends the flight as it would a reconcile, which
			// controller-runtime recovers: the lane is released and the
			// resource retried, not the process lost.
			if p := recover(); p != nil {
				err = fmt.Errorf("%w: %v", errPanic, p)
				logger.Error(err, "flight panicked", "stack", string(debug.Stack()))
			}
			turn.Release()
			metrics.Flights.Dec()
			f.land(logger, name, fl, res, err)
		}()
		res, err = fly(log.IntoContext(f.ctx, logger))
	})
}

// errPanic is the error of a flight that panicked.
var errPanic = errors.New("panic")

// land observes how name's flight fl ended, schedules name's next reconcile
// by it, and wakes the reconciles parked behind it.
func (f *Flights) land(logger logr.Logger, name string, fl *flight, res ctrl.Result, err error) {
	f.mu.Lock()
	delete(f.airborne, name)
	f.showOldest()
	wakes := fl.wakes
	f.mu.Unlock()
	result := metrics.FlightSuccess
	if err != nil {
		result = metrics.FlightError
		if errors.Is(err, errPanic) {
			result = metrics.FlightPanic
		}
	}
	metrics.FlightDuration.WithLabelValues(result).Observe(time.Since(fl.launched).Seconds())
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

// showOldest sets metrics.OldestFlightStart from the flights in the air;
// f.mu is locked.
func (f *Flights) showOldest() {
	var oldest time.Time
	for _, fl := range f.airborne {
		if oldest.IsZero() || fl.launched.Before(oldest) {
			oldest = fl.launched
		}
	}
	start := 0.0
	if !oldest.IsZero() {
		start = float64(oldest.UnixNano()) / 1e9
	}
	metrics.OldestFlightStart.Set(start)
}

// Wait blocks until every flight has landed.
func (f *Flights) Wait() { f.wg.Wait() }

// Forget drops the failure backoff of a resource that is gone.
func (f *Flights) Forget(name string) { f.backoff.Forget(name) }

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
