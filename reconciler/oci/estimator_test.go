package oci

import (
	"testing"
	"time"
)

// TestPollsEndCloseToTheWorkRequest simulates work requests of a fixed
// duration whose polls OCI answers after a round trip, and checks that once
// the estimator has seen a few, a wait ends within one poll step (a
// sixteenth of the duration) and a round trip of the real end, on average
// well within it, also after work requests get slower or faster and when
// PollMin is longer than a step (serve's 500 ms against 1 s); and that a
// long one is polled every PollMax until just before its expected end, not
// every step from the first PollMax on; and that a work request of a
// known duration takes one poll, a probe's two aside.
func TestPollsEndCloseToTheWorkRequest(t *testing.T) {
	const rtt = 3 * time.Millisecond
	const pollMax = 10 * time.Second
	// wait polls a work request that takes took and returns when it is seen
	// finished, and the polls it took: a poll sent at t finds it finished if
	// it was at t + rtt/2.
	wait := func(e *estimator, took time.Duration) (time.Duration, int) {
		var unfinished time.Duration
		w := e.begin()
		sent, _ := e.delay(0, w)
		polls := 1
		for sent+rtt/2 < took {
			unfinished = sent
			d, _ := e.delay(sent+rtt, w)
			sent += rtt + d
			polls++
		}
		e.endScouting(w)
		e.observe(unfinished, sent, w)
		return sent + rtt, polls
	}
	for _, tc := range []struct {
		name     string
		from, to time.Duration
		settle   int // work requests allowed to adapt after the change
		pollMin  time.Duration
	}{
		{"steady", 100 * time.Millisecond, 100 * time.Millisecond, 0, 5 * time.Millisecond},
		{"slower", 100 * time.Millisecond, 2 * time.Second, 5, 5 * time.Millisecond},
		{"faster", 2 * time.Second, 100 * time.Millisecond, 200, 5 * time.Millisecond},
		{"real OCI", 30 * time.Second, 30 * time.Second, 0, 5 * time.Millisecond},
		{"PollMin over a step", time.Second, time.Second, 0, 500 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := &estimator{min: tc.pollMin, max: pollMax}
			for range 20 {
				wait(e, tc.from)
			}
			for range tc.settle {
				wait(e, tc.to)
			}
			bound := min(tc.to/16, e.max) + 2*rtt
			meanBound := bound * 6 / 10
			if step := tc.to / 16; tc.pollMin > step {
				// Polls bracket the end a step before and after it (the
				// second, not PollMin, after the first), and the estimate
				// may sit anywhere the bracket contains the end.
				bound = 2*step + 2*rtt
				meanBound = bound
			}
			maxPolls := int(tc.to/pollMax) + 5
			var total time.Duration
			allPolls := 0
			for i := range 20 {
				seen, polls := wait(e, tc.to)
				allPolls += polls
				if late := seen - tc.to; late < 0 || late > bound {
					t.Fatalf("work request %d of %v: seen finished %v after its end, want at most %v", i, tc.to, late, bound)
				}
				if polls > maxPolls {
					t.Fatalf("work request %d of %v: %d polls, want at most %d", i, tc.to, polls, maxPolls)
				}
				total += seen - tc.to
			}
			// The estimate before (the time the finish was seen) put the
			// first poll just before the end and the second a step after it.
			if mean := total / 20; mean > meanBound {
				t.Errorf("seen finished %v after the end on average, want at most %v", mean, meanBound)
			}
			// Where the duration stays the same, one poll a sixteenth after the
			// expected end finds most finished; every probeEvery-th wait
			// probes before it as well.
			want := 1 + 1.5/probeEvery
			if mean := float64(allPolls) / 20; tc.from == tc.to && tc.to < pollMax && mean > want {
				t.Errorf("%.2f polls a work request on average, want at most %.2f", mean, want)
			}
		})
	}
}

// TestColdEstimatorScouts simulates 100 work requests written at once
// while the estimator has seen none (a controller just started): one is
// polled every PollMin, the others back off and are woken when it ends.
// Each wait still ends within a poll step of its work request's end, with
// a fraction of the polls that polling all of them every PollMin takes.
func TestColdEstimatorScouts(t *testing.T) {
	const waits, rtt = 100, 3 * time.Millisecond
	for _, tc := range []struct {
		name          string
		took, pollMin time.Duration
	}{
		{"benchmark", 2 * time.Second, 100 * time.Millisecond},
		{"real OCI", 30 * time.Second, 500 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := &estimator{min: tc.pollMin, max: 10 * time.Second}
			type waiter struct {
				next, unfinished, seen time.Duration
				done                   bool
				w                      *wait
				learned                <-chan struct{}
			}
			ws := make([]*waiter, waits)
			for i := range ws {
				w := &waiter{w: e.begin()}
				w.next, w.learned = e.delay(0, w.w)
				ws[i] = w
			}
			polls := 0
			for {
				var w *waiter // the next poll sent
				for _, c := range ws {
					if !c.done && (w == nil || c.next < w.next) {
						w = c
					}
				}
				if w == nil {
					break
				}
				now := w.next
				polls++
				if now+rtt/2 < tc.took {
					w.unfinished = now
					d, learned := e.delay(now+rtt, w.w)
					w.next, w.learned = now+rtt+d, learned
					continue
				}
				e.observe(w.unfinished, now, w.w)
				e.endScouting(w.w)
				w.done, w.seen = true, now+rtt
				for _, c := range ws { // woken by the estimate
					if c.done || c.learned == nil {
						continue
					}
					select {
					case <-c.learned:
						c.next, c.learned = w.seen+e.woken(w.seen), nil
					default:
					}
				}
			}
			bound := tc.pollMin + 3*rtt // the scout's step, then at once
			for _, w := range ws {
				if late := w.seen - tc.took; late < 0 || late > bound {
					t.Errorf("a wait ended %v after its work request, want at most %v", late, bound)
				}
			}
			every := waits * int(tc.took/tc.pollMin)
			if polls > every/3 || e.scouting {
				t.Errorf("%d polls (every wait every PollMin: %d), scout left %v", polls, every, e.scouting)
			}
			t.Logf("%d polls for %d work requests of %v (every PollMin: %d)", polls, waits, tc.took, every)
		})
	}
}
