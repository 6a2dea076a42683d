package oci

import (
	"testing"
	"time"
)

// TestPollsEndCloseToTheWorkRequest simulates work requests of a fixed
// duration whose polls OCI answers after a round trip, and checks that once
// the estimator has seen a few, a wait ends within one poll step (a
// sixteenth of the duration) and a round trip of the real end, also after
// work requests get slower or faster.
func TestPollsEndCloseToTheWorkRequest(t *testing.T) {
	const rtt = 3 * time.Millisecond
	// wait polls a work request that takes took and returns when it is seen
	// finished: a poll sent at t finds it finished if it was at t + rtt/2.
	wait := func(e *estimator, took time.Duration) time.Duration {
		var unfinished time.Duration
		sent := e.first()
		for sent+rtt/2 < took {
			unfinished = sent
			sent += rtt + e.next()
		}
		e.observe(unfinished, sent)
		return sent + rtt
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
			e := &estimator{min: 5 * time.Millisecond, max: 10 * time.Second}
			for range 20 {
				wait(e, tc.from)
			}
			for range tc.settle {
				wait(e, tc.to)
			}
			bound := min(tc.to/16, e.max) + 2*rtt
			var total time.Duration
			for i := range 20 {
				late := wait(e, tc.to) - tc.to
				if late < 0 || late > bound {
					t.Fatalf("work request %d of %v: seen finished %v after its end, want at most %v", i, tc.to, late, bound)
				}
				total += late
			}
			// On average well under a step: the old estimate (the time the
			// finish was seen) put the first poll just before the end and
			// the second a step after it.
			if mean := total / 20; mean > bound/2 {
				t.Errorf("seen finished %v after the end on average, want at most %v", mean, bound/2)
			}
		})
	}
}
