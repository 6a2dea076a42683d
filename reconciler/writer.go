package reconciler

import (
	"context"
	"math/rand/v2"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/reconciler/metrics"
	"github.com/peppy-ratio/lbregistrar/reconciler/oci"
	"github.com/peppy-ratio/lbregistrar/reconciler/plan"
)

// backendSetAPI is what syncing a backend set needs from OCI; *oci.Client implements it.
type backendSetAPI interface {
	GetBackendSet(ctx context.Context, loadBalancerID, name string) (*oci.BackendSet, error)
	UpdateBackendSet(ctx context.Context, bs *oci.BackendSet, backends []plan.Backend) (string, error)
	WaitWorkRequest(ctx context.Context, loadBalancerID, id string) error
}

// Backoff spaces the retries of one backend-set write.
type Backoff struct {
	Base, Max time.Duration
	// Attempts bounds the writes tried in one reconcile; after that the
	// reconcile fails and the workqueue's own backoff takes over.
	Attempts int
}

// delay is exponential backoff with full jitter, never shorter than the
// server's Retry-After.
func (b Backoff) delay(attempt int, retryAfter time.Duration) time.Duration {
	d := b.Base << min(attempt, 20)
	if d <= 0 || d > b.Max {
		d = b.Max
	}
	d = time.Duration(rand.Int64N(int64(d)) + 1)
	return max(d, retryAfter)
}

// syncRequest is one backend set to bring in line.
type syncRequest struct {
	LoadBalancerID string
	Name           string
	// Input returns the plan input for the backend set's current content;
	// called again after every fresh read.
	Input func(current []plan.Backend) plan.Input
	// RecordIntent stores the ownership record ahead of a write that adds backends.
	RecordIntent func(owned []v1beta1.Backend) error
	// Prefetched, when set, is used instead of the first read.
	Prefetched *oci.BackendSet
	// WaitTimeout bounds the wait for one work request; the wait goes on
	// after ctx is cancelled (shutdown), so an accepted write is recorded.
	WaitTimeout time.Duration
}

// syncResult is the outcome of a sync.
type syncResult struct {
	Plan        plan.Plan
	Written     bool
	WorkRequest *v1beta1.WorkRequest
	NotFound    bool // the load balancer or backend set does not exist
}

// syncBackendSet reads, plans and, when something changed, writes one
// backend set with If-Match and waits for its work request, retrying the
// whole read-modify-write on 409, 412, 429, 5xx, network errors and failed
// work requests. A write under way when ctx is cancelled (shutdown) is still
// waited for, so its outcome is recorded rather than lost or repeated.
func syncBackendSet(ctx context.Context, api backendSetAPI, b Backoff, req syncRequest) (syncResult, error) {
	var res syncResult
	for attempt := 0; ; attempt++ {
		bs, err := req.Prefetched, error(nil)
		if bs == nil || attempt > 0 {
			bs, err = api.GetBackendSet(ctx, req.LoadBalancerID, req.Name)
		}
		if err == nil {
			in := req.Input(bs.Backends)
			res.Plan = plan.Compute(in)
			if !res.Plan.Changed() {
				return res, nil
			}
			if len(res.Plan.Added) > 0 {
				if err := req.RecordIntent(plan.Intent(in.Owned, &res.Plan)); err != nil {
					return res, err
				}
			}
			err = write(ctx, api, bs, req.WaitTimeout, &res)
			if err == nil {
				return res, nil
			}
		}
		if oci.IsNotFound(err) {
			res.NotFound = true
			return res, nil
		}
		reason, after, retry := oci.Retryable(err)
		if !retry || attempt+1 >= b.Attempts || ctx.Err() != nil {
			return res, err
		}
		metrics.Retries.WithLabelValues(reason).Inc()
		t := time.NewTimer(b.delay(attempt, after))
		select {
		case <-ctx.Done():
			t.Stop()
			return res, ctx.Err()
		case <-t.C:
		}
	}
}

func write(ctx context.Context, api backendSetAPI, bs *oci.BackendSet, timeout time.Duration, res *syncResult) error {
	id, err := api.UpdateBackendSet(ctx, bs, res.Plan.Backends)
	if err != nil {
		return err
	}
	res.Written = true
	res.WorkRequest = &v1beta1.WorkRequest{ID: id, Status: "ACCEPTED", Time: metav1.Now()}
	waitCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	if err := api.WaitWorkRequest(waitCtx, bs.LoadBalancerID, id); err != nil {
		res.WorkRequest.Status = "FAILED"
		return err
	}
	res.WorkRequest.Status = "SUCCEEDED"
	res.WorkRequest.Time = metav1.Now()
	return nil
}
