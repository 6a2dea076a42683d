package oci

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"golang.org/x/time/rate"
)

// dispatched sends a request named name through d and records the order
// in which the server saw it.
type dispatched struct {
	d     *dispatcher
	url   string
	mu    sync.Mutex
	order []string
}

func newDispatched(t *testing.T, limit rate.Limit, burst int) *dispatched {
	t.Helper()
	o := &dispatched{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.mu.Lock()
		o.order = append(o.order, r.URL.Query().Get("name"))
		o.mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	o.d, o.url = &dispatcher{client: srv.Client(), limiter: rate.NewLimiter(limit, burst)}, srv.URL
	return o
}

func (o *dispatched) send(t *testing.T, ctx context.Context, name string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, o.url+"?name="+name, nil)
	if err != nil {
		t.Error(err)
		return
	}
	resp, err := o.d.Do(req)
	if err != nil {
		t.Error(err)
		return
	}
	_ = resp.Body.Close()
}

// TestYieldingCallsLetTheWritePathGoFirst empties the rate limit's bucket,
// then sends a yielding call (a health read) and, a moment later, two
// calls of the write path: the write path's go first.
func TestYieldingCallsLetTheWritePathGoFirst(t *testing.T) {
	o := newDispatched(t, 50, 10)
	o.d.limiter.ReserveN(time.Now(), 10)
	var wg sync.WaitGroup
	wg.Go(func() { o.send(t, Yielding(t.Context()), "health") })
	time.Sleep(10 * time.Millisecond)
	wg.Go(func() { o.send(t, t.Context(), "write") })
	wg.Go(func() { o.send(t, t.Context(), "poll") })
	wg.Wait()
	if i := slices.Index(o.order, "health"); i != 2 {
		t.Errorf("calls went in the order %v, want the yielding one last", o.order)
	}
}

// TestYieldingCallIsNotStarved keeps the bucket empty with calls of the
// write path, back to back: a yielding call still goes, once the time the
// bucket takes to fill has passed.
func TestYieldingCallIsNotStarved(t *testing.T) {
	o := newDispatched(t, 100, 10) // the bucket fills in 100 ms
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for ctx.Err() == nil {
				o.send(t, context.WithoutCancel(ctx), "write")
			}
		})
	}
	time.Sleep(50 * time.Millisecond)
	start := time.Now()
	o.send(t, Yielding(t.Context()), "health")
	took := time.Since(start)
	cancel()
	wg.Wait()
	if took > time.Second {
		t.Errorf("the yielding call waited %v behind a busy write path, want about the 100 ms the bucket takes to fill", took)
	}
}

// TestUnpacedCallsDoNotYield: with no rate limit there is nothing to yield.
func TestUnpacedCallsDoNotYield(t *testing.T) {
	o := newDispatched(t, rate.Inf, 0)
	start := time.Now()
	o.send(t, Yielding(t.Context()), "health")
	if took := time.Since(start); took > 100*time.Millisecond {
		t.Errorf("a yielding call without a rate limit took %v", took)
	}
}
