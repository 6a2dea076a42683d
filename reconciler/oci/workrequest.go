package oci

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/oracle/oci-go-sdk/v65/loadbalancer"
	"github.com/oracle/oci-go-sdk/v65/networkloadbalancer"

	"github.com/peppy-ratio/lbregistrar/reconciler/metrics"
)

// WaitWorkRequest polls a work request until it finishes. It returns nil on
// success and a retryable *Error (reason "workrequest") when it failed.
//
// Polling adapts to how long work requests of this kind have been taking:
// the first poll comes just before the expected end, later ones at a
// sixteenth of it, within [PollMin, PollMax], so the wait ends close to the real
// finish without polling a slow work request every few milliseconds.
func (c *Client) WaitWorkRequest(ctx context.Context, loadBalancerID, id string) error {
	k := kindOf(loadBalancerID)
	est := c.polls[k]
	start := time.Now()
	delay := est.first()
	for {
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		state, message, err := c.workRequestState(ctx, loadBalancerID, id)
		if err != nil {
			if _, _, retry := Retryable(err); !retry {
				return err
			}
			delay = est.next() // a failed poll is not a failed work request
			continue
		}
		switch state {
		case "SUCCEEDED":
			d := time.Since(start)
			est.observe(d)
			metrics.WorkRequestDuration.WithLabelValues(string(k), "succeeded").Observe(d.Seconds())
			return nil
		case "FAILED", "CANCELED":
			metrics.WorkRequestDuration.WithLabelValues(string(k), strings.ToLower(state)).Observe(time.Since(start).Seconds())
			if message == "" {
				message = "work request " + id + " " + strings.ToLower(state)
			}
			return &Error{Op: "WorkRequest", Code: state, Reason: ReasonWorkRequest, Err: errors.New(message)}
		}
		delay = est.next()
	}
}

const opGetWorkRequest = "GetWorkRequest"

func (c *Client) workRequestState(ctx context.Context, loadBalancerID, id string) (state, message string, err error) {
	sdkCtx, cs := call(ctx)
	if IsNetworkLoadBalancer(loadBalancerID) {
		resp, err := c.nlb.GetWorkRequest(sdkCtx, networkloadbalancer.GetWorkRequestRequest{WorkRequestId: &id})
		if err := classify(opGetWorkRequest, err, cs); err != nil {
			return "", "", err
		}
		return string(resp.Status), "", nil
	}
	resp, err := c.lb.GetWorkRequest(sdkCtx, loadbalancer.GetWorkRequestRequest{WorkRequestId: &id})
	if err := classify(opGetWorkRequest, err, cs); err != nil {
		return "", "", err
	}
	var msgs []string
	for _, e := range resp.ErrorDetails {
		if e.Message != nil {
			msgs = append(msgs, *e.Message)
		}
	}
	return string(resp.LifecycleState), strings.Join(msgs, "; "), nil
}

// estimator tracks how long work requests of one kind take (an exponentially
// weighted moving average) to place polls.
type estimator struct {
	min, max time.Duration

	mu   sync.Mutex
	avg  time.Duration
	seen bool
}

func (e *estimator) first() time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.clamp(e.avg * 9 / 10)
}

func (e *estimator) next() time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.clamp(e.avg / 16)
}

func (e *estimator) observe(d time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.seen {
		e.avg, e.seen = d, true
		return
	}
	e.avg = (e.avg*7 + d*3) / 10
}

func (e *estimator) clamp(d time.Duration) time.Duration {
	return min(max(d, e.min), e.max)
}
