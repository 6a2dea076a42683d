package lanes

import (
	"context"
	"errors"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/peppy-ratio/lbregistrar/reconciler/metrics"
)

// Flights that fail together (status writes an API server was too busy
// for) retry apart: each after its backoff plus up to half of it again.
func TestFailedFlightsRetryJittered(t *testing.T) {
	retries := map[string]time.Duration{}
	f := NewFlights(func(name string, after time.Duration) { retries[name] = after })
	const flights = 50
	distinct := map[time.Duration]bool{}
	for i := range flights {
		name := string(rune('a' + i))
		f.land(logr.Discard(), name, &flight{launched: time.Now()}, ctrl.Result{}, errors.New("status write timed out"))
		after := retries[name]
		if after < FailureBackoffBase || after > FailureBackoffBase*3/2 {
			t.Errorf("flight %s retries after %s, want %s to %s", name, after, FailureBackoffBase, FailureBackoffBase*3/2)
		}
		distinct[after] = true
	}
	if len(distinct) < flights/2 {
		t.Errorf("%d flights failing together retry at %d distinct times", flights, len(distinct))
	}
}

// A flight runs on its turn of the lane, with a context of its own that the
// reconcile's end does not cancel, and releases the lane when it lands,
// waking the resources parked on it. While it is in the air, the oldest
// flight's launch time is exported; 0 once none is.
func TestLaunchFliesOnTheTurnAndReleasesIt(t *testing.T) {
	l, f, _ := newFlightDeck()
	turn := takeLane(t, l, "lb", "a")
	reconcileCtx, endReconcile := context.WithCancel(quiet())
	flying, land := make(chan context.Context), make(chan struct{})
	before := time.Now()
	f.Launch(reconcileCtx, "a", turn, func(ctx context.Context) (ctrl.Result, error) {
		flying <- ctx
		<-land
		return ctrl.Result{}, nil
	})
	launched := time.Now()
	endReconcile() // the worker is free at once
	flightCtx := <-flying

	if err := flightCtx.Err(); err != nil {
		t.Errorf("the flight's context ended with its reconcile: %v", err)
	}
	if got := gauge(t, metrics.OldestFlightStart); got < unix(before) || got > unix(launched) {
		t.Errorf("oldest flight launched at %f, want %f to %f", got, unix(before), unix(launched))
	}
	laneFree := make(chan struct{})
	if _, ok := l.TryAcquire("lb", "b", func() { close(laneFree) }); ok {
		t.Fatal("the lane was free during the flight")
	}
	close(land)
	<-laneFree
	f.Wait()
	if got := l.Snapshot(); len(got) != 0 {
		t.Errorf("lanes after landing: %+v, want none busy", got)
	}
	if got := gauge(t, metrics.OldestFlightStart); got != 0 {
		t.Errorf("oldest flight launched at %f with none in the air, want 0", got)
	}
}

// A reconcile of a resource whose flight is in the air parks behind it, and
// is woken once when it lands; with no flight, nothing parks.
func TestParkBehindAFlight(t *testing.T) {
	l, f, _ := newFlightDeck()
	woken := map[string]int{}
	var mu sync.Mutex
	wake := func(name string) func() {
		return func() {
			mu.Lock()
			defer mu.Unlock()
			woken[name]++
		}
	}
	if f.ParkBehind("a", wake("before launch")) || f.Awaited("a") {
		t.Fatal("parked behind a flight that was not launched")
	}

	flying, land := make(chan struct{}), make(chan struct{})
	f.Launch(quiet(), "a", takeLane(t, l, "lb", "a"), func(context.Context) (ctrl.Result, error) {
		close(flying)
		<-land
		return ctrl.Result{}, nil
	})
	<-flying
	if f.Awaited("a") {
		t.Error("a flight nothing parked behind is awaited")
	}
	if !f.ParkBehind("a", wake("during flight")) {
		t.Fatal("not parked behind the flight in the air")
	}
	if !f.Awaited("a") {
		t.Error("a flight a reconcile parked behind is not awaited")
	}
	if f.ParkBehind("b", wake("other resource")) || f.Awaited("b") {
		t.Error("parked behind another resource's flight")
	}
	close(land)
	f.Wait()

	if want := map[string]int{"during flight": 1}; !maps.Equal(woken, want) {
		t.Errorf("woken %v, want %v", woken, want)
	}
	if f.ParkBehind("a", wake("after landing")) || f.Awaited("a") {
		t.Error("parked behind a flight that has landed")
	}
}

// A flight lands as its reconcile would have returned: an error (or a
// panic) requeues it after the per-resource backoff, which grows while its
// flights fail; a success requeues after its RequeueAfter, if any, and
// resets the backoff. Each landing is counted by result, and the lane is
// released however it ends.
func TestLandingRequeues(t *testing.T) {
	const b = FailureBackoffBase
	failed := func(context.Context) (ctrl.Result, error) { return ctrl.Result{}, errors.New("UpdateBackendSet: 500") }
	panicked := func(context.Context) (ctrl.Result, error) { panic("nil map") }
	converged := func(after time.Duration) func(context.Context) (ctrl.Result, error) {
		return func(context.Context) (ctrl.Result, error) { return ctrl.Result{RequeueAfter: after}, nil }
	}
	type landing struct {
		fly      func(context.Context) (ctrl.Result, error)
		result   string
		min, max time.Duration // of the requeue; 0, 0 for none
	}
	for _, tc := range []struct {
		name     string
		landings []landing
	}{
		{"an error requeues after a growing backoff", []landing{
			{failed, metrics.FlightError, b, b * 3 / 2},
			{failed, metrics.FlightError, 2 * b, 3 * b},
			{failed, metrics.FlightError, 4 * b, 6 * b},
		}},
		{"a success requeues after its RequeueAfter", []landing{
			{converged(time.Hour), metrics.FlightSuccess, time.Hour, time.Hour},
		}},
		{"a success without RequeueAfter is not requeued", []landing{
			{converged(0), metrics.FlightSuccess, 0, 0},
		}},
		{"a success resets the backoff", []landing{
			{failed, metrics.FlightError, b, b * 3 / 2},
			{failed, metrics.FlightError, 2 * b, 3 * b},
			{converged(time.Minute), metrics.FlightSuccess, time.Minute, time.Minute},
			{failed, metrics.FlightError, b, b * 3 / 2},
		}},
		{"a panic requeues as an error", []landing{
			{panicked, metrics.FlightPanic, b, b * 3 / 2},
			{panicked, metrics.FlightPanic, 2 * b, 3 * b},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, f, requeues := newFlightDeck()
			for i, want := range tc.landings {
				landed := flightsLanded(t)
				f.Launch(quiet(), "a", takeLane(t, l, "lb", "a"), want.fly)
				f.Wait()

				if got := l.Snapshot(); len(got) != 0 {
					t.Errorf("landing %d: lanes %+v, want none busy", i, got)
				}
				got := requeues.take()
				switch {
				case want.max == 0 && len(got) != 0:
					t.Errorf("landing %d: requeued %v, want not", i, got)
				case want.max != 0 && (len(got) != 1 || got[0].name != "a" || got[0].after < want.min || got[0].after > want.max):
					t.Errorf("landing %d: requeued %v, want a after %s to %s", i, got, want.min, want.max)
				}
				now := flightsLanded(t)
				for _, result := range []string{metrics.FlightSuccess, metrics.FlightError, metrics.FlightPanic} {
					wantCount := landed[result]
					if result == want.result {
						wantCount++
					}
					if now[result] != wantCount {
						t.Errorf("landing %d: %s flights counted %d, want %d", i, result, now[result], wantCount)
					}
				}
			}
		})
	}
}

// At shutdown the flights' context is cancelled and Start returns only once
// the flights in the air have landed (a write under way is still waited for
// and recorded); a flight launched meanwhile does not fly, and its lane is
// released.
func TestShutdownWaitsForFlightsInTheAir(t *testing.T) {
	l, f, requeues := newFlightDeck()
	cancelled, land := make(chan struct{}), make(chan struct{})
	f.Launch(quiet(), "a", takeLane(t, l, "lb-a", "a"), func(ctx context.Context) (ctrl.Result, error) {
		<-ctx.Done()
		close(cancelled)
		<-land // the write under way, waited for
		return ctrl.Result{RequeueAfter: time.Hour}, nil
	})

	managerCtx, stopManager := context.WithCancel(context.Background())
	stopped := make(chan error)
	go func() { stopped <- f.Start(managerCtx) }()
	stopManager()
	<-cancelled
	select {
	case err := <-stopped:
		t.Fatalf("Start returned (%v) with a flight in the air", err)
	default:
	}

	f.Launch(quiet(), "b", takeLane(t, l, "lb-b", "b"), func(context.Context) (ctrl.Result, error) {
		t.Error("a flight launched after shutdown began flew")
		return ctrl.Result{}, nil
	})
	if got := l.Snapshot(); len(got) != 1 || got[0].LBRegistrar != "a" {
		t.Errorf("lanes after a launch at shutdown: %+v, want a's alone", got)
	}
	if f.ParkBehind("b", func() { t.Error("woken behind a flight that never flew") }) {
		t.Error("parked behind a flight that never flew")
	}

	close(land)
	if err := <-stopped; err != nil {
		t.Fatalf("Start: %v", err)
	}
	if got := l.Snapshot(); len(got) != 0 {
		t.Errorf("lanes after shutdown: %+v, want none busy", got)
	}
	if got := requeues.take(); len(got) != 1 || got[0] != (requeue{"a", time.Hour}) {
		t.Errorf("requeued %v, want a after 1h as the landed flight asked", got)
	}
}

// newFlightDeck returns free lanes and flights whose requeues are recorded.
func newFlightDeck() (*Lanes, *Flights, *requeues) {
	r := &requeues{}
	return New(), NewFlights(r.add), r
}

type requeue struct {
	name  string
	after time.Duration
}

// requeues records the requeues of landing flights, which call it from
// their own goroutines.
type requeues struct {
	mu  sync.Mutex
	all []requeue
}

func (r *requeues) add(name string, after time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.all = append(r.all, requeue{name, after})
}

// take returns the requeues recorded since it last did.
func (r *requeues) take() []requeue {
	r.mu.Lock()
	defer r.mu.Unlock()
	all := r.all
	r.all = nil
	return all
}

// takeLane takes the free lane of lb for resource.
func takeLane(t *testing.T, l *Lanes, lb, resource string) *Turn {
	t.Helper()
	turn, ok := l.TryAcquire(lb, resource, nil)
	if !ok {
		t.Fatalf("lane %s busy", lb)
	}
	return turn
}

// quiet is a reconcile's context whose logger discards what flights log.
func quiet() context.Context { return log.IntoContext(context.Background(), logr.Discard()) }

// flightsLanded is how many flights have landed so far, by result.
func flightsLanded(t *testing.T) map[string]uint64 {
	t.Helper()
	landed := map[string]uint64{}
	for _, result := range []string{metrics.FlightSuccess, metrics.FlightError, metrics.FlightPanic} {
		var m dto.Metric
		if err := metrics.FlightDuration.WithLabelValues(result).(prometheus.Metric).Write(&m); err != nil {
			t.Fatal(err)
		}
		landed[result] = m.GetHistogram().GetSampleCount()
	}
	return landed
}

func gauge(t *testing.T, g prometheus.Gauge) float64 {
	t.Helper()
	var m dto.Metric
	if err := g.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetGauge().GetValue()
}

func unix(at time.Time) float64 { return float64(at.UnixNano()) / 1e9 }
