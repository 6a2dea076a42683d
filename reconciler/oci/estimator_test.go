package oci

import (
	"testing"
	"time"
)

// TestPollsEndCloseToTheWorkRequest simulates work requests of a fixed
// duration whose polls OCI answers after a round trip, and checks that once
// the estimator has seen a few, a wait ends within one poll step (a
// sixteenth of the duration) and a round trip of the real end, on average
// well within it, also after work requests get slower or faster; and that
// a long one is polled every PollMax until just before its expected end,
// not every step from the first PollMax on.
func TestPollsEndCloseToTheWorkRequest(t *testing.T) {
	const rtt = 3 * time.Millisecond
	const pollMax = 10 * time.Second
	// wait polls a work request that takes took and returns when it is seen
	// finished, and the polls it took: a poll sent at t finds it finished if
	// it was at t + rtt/2.
	wait := func(e *estimator, took time.Duration) (time.Duration, int) {
		var unfinished time.Duration
		sent, polls := e.delay(0), 1
		for sent+rtt/2 < took {
			unfinished = sent
			sent += rtt + e.delay(sent+rtt)
			polls++
		}
		e.observe(unfinished, sent)
		return sent + rtt, polls
	}
	for _, tc := range []struct {
		name     string
		from, to time.Duration
		settle   int // work requests allowed to adapt after the change
	}{
		{"steady", 100 * time.Millisecond, 100 * time.Millisecond, 0},
		{"slower", 100 * time.Millisecond, 2 * time.Second, 5},
		{"faster", 2 * time.Second, 100 * time.Millisecond, 120},
		{"real OCI", 30 * time.Second, 30 * time.Second, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := &estimator{min: 5 * time.Millisecond, max: pollMax}
			for range 20 {
				wait(e, tc.from)
			}
			for range tc.settle {
				wait(e, tc.to)
			}
			bound := min(tc.to/16, e.max) + 2*rtt
			maxPolls := int(tc.to/pollMax) + 5
			var total time.Duration
			for i := range 20 {
				seen, polls := wait(e, tc.to)
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
			if mean := total / 20; mean > bound*6/10 {
				t.Errorf("seen finished %v after the end on average, want at most %v", mean, bound*6/10)
			}
		})
	}
}
