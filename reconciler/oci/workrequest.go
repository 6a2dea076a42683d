package oci

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/oracle/oci-go-sdk/v65/loadbalancer"
	"github.com/oracle/oci-go-sdk/v65/networkloadbalancer"

	"github.com/peppy-ratio/lbregistrar/reconciler/metrics"
)

// WaitWorkRequest polls a work request until it finishes. It returns nil on
// success and an *Error with Op "WorkRequest" when it failed, carrying why
// OCI says it did: retryable (reason "workrequest") unless that says the
// write itself was wrong or hit a limit (IsRefused).
//
// Polling adapts to how long work requests of this kind have been taking:
// the first poll comes a sixteenth of it after the expected end (or
// PollMax after the write, and every PollMax until then), later ones every
// sixteenth within [PollMin, PollMax], so the wait ends close to the real
// finish without polling a slow work request every few seconds. Every
// eighth wait probes: it polls a sixteenth before the expected end too, so
// the two polls bracket it and the estimate stays true.
func (c *Client) WaitWorkRequest(ctx context.Context, loadBalancerID, id string) error {
	k := kindOf(loadBalancerID)
	est := c.polls[k]
	start := time.Now()
	var unfinished time.Duration // when the last poll that found it running was sent
	w := est.begin()
	defer est.endScouting(w)
	delay, learned := est.delay(0, w)
	for {
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-learned: // the first of its kind ended: polls follow the estimate from now
			t.Stop()
			delay, learned = est.woken(time.Since(start)), nil
			continue
		case <-t.C:
		}
		sent := time.Since(start)
		wr, err := c.workRequest(ctx, loadBalancerID, id)
		if err != nil {
			if _, _, retry := Retryable(err); !retry {
				return err
			}
			delay, learned = est.delay(time.Since(start), w) // a failed poll is not a failed work request
			continue
		}
		switch wr.state {
		case "SUCCEEDED":
			est.observe(unfinished, sent, w)
			metrics.WorkRequestDuration.WithLabelValues(string(k), "succeeded").Observe(time.Since(start).Seconds())
			return nil
		case "FAILED", "CANCELED":
			metrics.WorkRequestDuration.WithLabelValues(string(k), strings.ToLower(wr.state)).Observe(time.Since(start).Seconds())
			return c.failure(ctx, loadBalancerID, id, wr)
		}
		unfinished = sent
		delay, learned = est.delay(time.Since(start), w)
	}
}

const (
	opGetWorkRequest = "GetWorkRequest"
	opWorkRequest    = "WorkRequest"
)

// workRequestState is a work request as far as waiting for it goes.
type workRequestState struct {
	state       string
	compartment string             // an NLB one's, which listing its errors needs
	errors      []workRequestError // a classic one's errorDetails
}

// workRequestError is one reason OCI gives for a failed work request.
type workRequestError struct{ code, message string }

func (c *Client) workRequest(ctx context.Context, loadBalancerID, id string) (workRequestState, error) {
	sdkCtx, cs := call(ctx)
	if IsNetworkLoadBalancer(loadBalancerID) {
		var read networkloadbalancer.WorkRequest
		_, err := readOne(sdkCtx, &c.nlb.BaseClient, "networkLoadBalancer", opGetWorkRequest, "/workRequests/"+id, &read)
		if err := classify(opGetWorkRequest, err, cs); err != nil {
			return workRequestState{}, err
		}
		return workRequestState{state: string(read.Status), compartment: deref(read.CompartmentId)}, nil
	}
	var read loadbalancer.WorkRequest
	_, err := readOne(sdkCtx, &c.lb.BaseClient, "loadBalancer", opGetWorkRequest, "/loadBalancerWorkRequests/"+id, &read)
	if err := classify(opGetWorkRequest, err, cs); err != nil {
		return workRequestState{}, err
	}
	wr := workRequestState{state: string(read.LifecycleState)}
	for _, e := range read.ErrorDetails {
		wr.errors = append(wr.errors, workRequestError{code: string(e.ErrorCode), message: deref(e.Message)})
	}
	return wr, nil
}

// rejectedCodes are the reasons for a failed work request that say the
// write itself was wrong or hit a limit, so sending it again cannot help:
// the classic errorDetails code BAD_INPUT, and the OCI error codes (which
// NLB work request errors use) the API errors page marks "Retry: No" for
// a bad request or a limit.
var rejectedCodes = map[string]bool{
	"BAD_INPUT": true, "InvalidParameter": true, "MissingParameter": true, "CannotParseRequest": true,
	"LimitExceeded": true, "QuotaExceeded": true,
}

// failure is the error for a work request that ended FAILED or CANCELED,
// with the reasons OCI gives: a classic work request's errorDetails, an NLB
// one's ListWorkRequestErrors.
func (c *Client) failure(ctx context.Context, loadBalancerID, id string, wr workRequestState) error {
	e := &Error{Op: opWorkRequest, Code: wr.state, Class: ClassWorkRequest}
	reasons := wr.errors
	if IsNetworkLoadBalancer(loadBalancerID) {
		var err error
		if reasons, err = c.networkWorkRequestErrors(ctx, id, wr.compartment); err != nil {
			e.Err = fmt.Errorf("work request %s %s; why could not be read: %w", id, strings.ToLower(wr.state), err)
			return e
		}
	}
	msgs := []string{"work request " + id + " " + strings.ToLower(wr.state)}
	for _, r := range reasons {
		msgs = append(msgs, r.code+": "+r.message)
		if rejectedCodes[r.code] {
			e.Class = ""
		}
	}
	e.Err = errors.New(strings.Join(msgs, "; "))
	return e
}

func (c *Client) networkWorkRequestErrors(ctx context.Context, id, compartment string) ([]workRequestError, error) {
	var out []workRequestError
	err := eachPage(ctx, "ListWorkRequestErrors", func(ctx context.Context, page *string) (*string, error) {
		resp, err := c.nlb.ListWorkRequestErrors(ctx, networkloadbalancer.ListWorkRequestErrorsRequest{WorkRequestId: &id, CompartmentId: &compartment, Page: page})
		for _, e := range resp.Items {
			out = append(out, workRequestError{code: deref(e.Code), message: deref(e.Message)})
		}
		return resp.OpcNextPage, err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// estimator tracks how long work requests of one kind take (an exponentially
// weighted moving average) to place polls.
//
// Until it has seen one end it knows nothing, and one work request, the
// scout, is polled every PollMin; the others back off, each waiting as long
// again as it has waited, and are woken when the first one ends. A
// controller that starts (no estimate yet) and then writes 100 load
// balancers at once would otherwise poll all 100 every PollMin until the
// first ends: at serve's defaults (500 ms, 10 calls/s) 200 polls a second
// for 30 s against a rate limit of 10, in the way of every write.
type estimator struct {
	min, max time.Duration

	mu       sync.Mutex
	avg      time.Duration
	seen     bool
	scouting bool          // a wait polls every min until the first end
	learned  chan struct{} // closed at the first end; nil before any wait asked
	probeIn  int           // waits until the next probe
}

// probeEvery is how often a wait probes (polls before the expected end as
// well as after): a wait that does not, found finished by its one poll,
// says only that the work request took no longer than expected, which
// cannot bring the estimate down when work requests get faster.
const probeEvery = 8

// wait is one wait's part in the estimate.
type wait struct {
	scout bool // it polls every min until the first end
	probe bool // it polls before the expected end as well as after
}

// begin starts a wait, probing every probeEvery-th.
func (e *estimator) begin() *wait {
	e.mu.Lock()
	defer e.mu.Unlock()
	w := &wait{probe: e.probeIn == 0}
	if w.probe {
		e.probeIn = probeEvery - 1
	} else {
		e.probeIn--
	}
	return w
}

// delay is how long to wait before polling a work request written elapsed
// ago: until a sixteenth after the expected end (a probe: just before it,
// then as afterExpected says), as long as PollMax allows; from there, a
// sixteenth of the expected duration. With no estimate yet, the wait that
// is scout (or becomes it, when none is) polls every PollMin, the others
// as said above; learned is closed when the estimate comes, and is nil
// once there is one.
func (e *estimator) delay(elapsed time.Duration, w *wait) (_ time.Duration, learned <-chan struct{}) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.seen {
		if e.learned == nil {
			e.learned = make(chan struct{})
		}
		if !e.scouting {
			e.scouting, w.scout = true, true
		}
		if w.scout {
			return e.min, e.learned
		}
		return e.clamp(elapsed), e.learned
	}
	if w.probe {
		return e.until(e.avg*15/16, elapsed, e.afterExpected(elapsed)), nil
	}
	return e.until(e.avg*17/16, elapsed, e.clamp(e.avg/16)), nil
}

// afterExpected is the delay of a probe's poll sent elapsed after the
// write, past the point just before the expected end: the poll after the
// one there goes a sixteenth after that end, even when PollMin is longer,
// so that polls bracket the end by a step on both sides (at serve's
// PollMin of 500 ms, a 1 s work request found running at 15/16 s was
// otherwise seen done at 1.44 s, not 1.06 s); later ones every sixteenth,
// within the bounds. Callers have e.mu locked.
func (e *estimator) afterExpected(elapsed time.Duration) time.Duration {
	step := e.clamp(e.avg / 16)
	if elapsed < e.avg { // the poll before the end found it running
		return min(e.avg*17/16-elapsed, step)
	}
	return step
}

// woken is the delay of a wait woken by the first estimate: none when its
// work request, written elapsed ago, is past the expected end already.
func (e *estimator) woken(elapsed time.Duration) time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.until(e.avg*15/16, elapsed, 0)
}

// until is the time from elapsed until point (just before or after the
// expected end), within the bounds; past it, after. Callers have e.mu
// locked.
func (e *estimator) until(point, elapsed, after time.Duration) time.Duration {
	if due := point - elapsed; due > 0 {
		return e.clamp(due)
	}
	return after
}

// endScouting hands the scout's role on when its wait ends (its work
// request failed, or the wait gave up) before an estimate came.
func (e *estimator) endScouting(w *wait) {
	if !w.scout {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.scouting, w.scout = false, false
}

// observe records a work request found finished by the poll sent at done,
// and found running by the one sent at unfinished (zero if none was). It
// finished in between, so the estimate is the midpoint: taking done alone
// would count the polls' lateness as the work request's own time and place
// the next polls later and later. Found finished by its first poll, it
// ended some time before. A probe's first poll came before the expected
// end: half a step is taken off, so the estimate comes down until a
// probe's first poll finds one running, and the next wait probes too. A
// wait that did not probe learns nothing then: it ended by the expected
// end and a step.
func (e *estimator) observe(unfinished, done time.Duration, w *wait) {
	e.mu.Lock()
	defer e.mu.Unlock()
	d := done - e.avg/32
	if unfinished > 0 {
		d = (unfinished + done) / 2
	} else if e.seen && !w.probe {
		return
	} else if e.seen {
		e.probeIn = 0
	}
	if !e.seen {
		e.avg, e.seen = d, true
		if e.learned != nil {
			close(e.learned)
		}
		return
	}
	e.avg = (e.avg*7 + d*3) / 10
}

func (e *estimator) clamp(d time.Duration) time.Duration {
	return min(max(d, e.min), e.max)
}
