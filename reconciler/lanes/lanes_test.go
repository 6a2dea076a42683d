package lanes

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Releasing a lane wakes every parked resource at once, however many, with
// nothing left running to deliver the wakes: the controller's queue has
// each resource once however often it is woken, and drops wakes once the
// manager has shut it down.
func TestWakeupsAreDeliveredAtOnceAndCoalesced(t *testing.T) {
	const parked = 2000
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	l, w := New(), &Wakeups{}
	if err := w.Start(context.Background(), queue); err != nil {
		t.Fatal(err)
	}
	wake := func(name string) func() { return func() { w.Wake(name) } }
	busy, _ := l.TryAcquire("lb", "holder", nil)
	for i := range parked {
		name := fmt.Sprintf("parked-%d", i)
		l.TryAcquire("lb", name, wake(name))
	}
	busy.Release()
	if n := queue.Len(); n != parked {
		t.Fatalf("%d resources enqueued by the release, want %d", n, parked)
	}
	for i := range parked {
		wake(fmt.Sprintf("parked-%d", i))()
	}
	if n := queue.Len(); n != parked {
		t.Fatalf("%d resources enqueued after waking them again, want each once (%d)", n, parked)
	}
	queue.ShutDown()
	wake("after-shutdown")() // returns, dropped
}

func TestSnapshot(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 1, 0, 0, 0, time.UTC)
	now := t0
	l := New()
	l.now = func() time.Time { return now }

	busy, ok := l.TryAcquire("lb-b", "holder", nil)
	if !ok {
		t.Fatal("free lane not taken")
	}
	now = t0.Add(time.Second)
	busy.Step(Waiting, "api", "wr-1")
	now = t0.Add(2 * time.Second)
	l.TryAcquire("lb-b", "second", func() {})
	now = t0.Add(3 * time.Second)
	l.TryAcquire("lb-b", "first", func() {})
	l.TryAcquire("lb-b", "second", func() {}) // parked again: still waiting since it first parked
	idle, _ := l.TryAcquire("lb-a", "alone", nil)

	want := []Status{
		{LoadBalancerID: "lb-a", LBRegistrar: "alone", TakenSince: t0.Add(3 * time.Second),
			Step: Step{Phase: Reading, Since: t0.Add(3 * time.Second)}, Parked: []Parked{}},
		{LoadBalancerID: "lb-b", LBRegistrar: "holder", TakenSince: t0,
			Step:   Step{Phase: Waiting, BackendSet: "api", WorkRequest: "wr-1", Since: t0.Add(time.Second)},
			Parked: []Parked{{Name: "second", Since: t0.Add(2 * time.Second)}, {Name: "first", Since: t0.Add(3 * time.Second)}}},
	}
	if diff := cmp.Diff(want, l.Snapshot()); diff != "" {
		t.Fatalf("snapshot (-want +got):\n%s", diff)
	}

	idle.Release()
	busy.Release()
	if got := l.Snapshot(); got == nil || len(got) != 0 {
		t.Fatalf("after release: %+v, want an empty list", got)
	}
}

func TestLanesSerializePerLoadBalancer(t *testing.T) {
	l := New()
	var inA, maxA atomic.Int32
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var lane *Turn
			for ok := false; !ok; {
				woken := make(chan struct{})
				if lane, ok = l.TryAcquire("a", fmt.Sprint("r", i), func() { close(woken) }); !ok {
					<-woken
				}
			}
			n := inA.Add(1)
			for {
				m := maxA.Load()
				if n <= m || maxA.CompareAndSwap(m, n) {
					break
				}
			}
			time.Sleep(time.Millisecond)
			inA.Add(-1)
			lane.Release()
		}()
	}
	wg.Wait()
	if maxA.Load() != 1 {
		t.Fatalf("%d writers had lane a at once", maxA.Load())
	}

	// A busy lane parks the resource once and wakes it on release;
	// another load balancer is not delayed.
	laneA, ok := l.TryAcquire("a", "x", nil)
	if !ok {
		t.Fatal("free lane not taken")
	}
	woken := 0
	for range 3 {
		if _, ok := l.TryAcquire("a", "y", func() { woken++ }); ok {
			t.Fatal("busy lane taken twice")
		}
	}
	laneB, ok := l.TryAcquire("b", "z", nil)
	if !ok {
		t.Fatal("lane b blocked by lane a")
	}
	laneB.Release()
	laneA.Release()
	if woken != 1 {
		t.Fatalf("parked resource woken %d times, want 1", woken)
	}
	if len(l.busy) != 0 {
		t.Fatalf("lanes left behind: %v", l.busy)
	}
}
