// Package backendset brings one backend set in line on its load
// balancer's turn (package lanes): read it, plan it over the ownership
// record (package plan), and only when something changed write it with
// If-Match and wait for the work request, retrying on 409, 412, 429, 5xx,
// network errors and failed work requests. A write OCI accepted is waited
// for even through shutdown, so its outcome is recorded, not lost or
// repeated. Refusals remembers the writes OCI refused for what they contain,
// so that their additions back off while the rest of the backend set is
// written.
//
// It reads and writes OCI through API and nothing else: the ownership
// record reaches it as a plan input and leaves it through
// Request.RecordIntent and Result, and what the resource's status says is
// its caller's to decide.
package backendset

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/reconciler/lanes"
	"github.com/peppy-ratio/lbregistrar/reconciler/metrics"
	"github.com/peppy-ratio/lbregistrar/reconciler/oci"
	"github.com/peppy-ratio/lbregistrar/reconciler/plan"
)

// API is what syncing a backend set needs from OCI; *oci.Client implements it.
type API interface {
	Reader
	UpdateBackendSet(ctx context.Context, bs *oci.BackendSet, backends []plan.Backend, failed string) (string, error)
	WaitWorkRequest(ctx context.Context, loadBalancerID, id string) error
	WorkRequests(ctx context.Context, loadBalancerID string) ([]oci.WorkRequest, error)
}

// Reader is what planning a backend set needs from OCI.
type Reader interface {
	GetBackendSet(ctx context.Context, loadBalancerID, name string) (*oci.BackendSet, error)
}

// ReadAll reads the named backend sets of a load balancer at once. A
// backend set whose read failed is left out: its sync reads it again, and
// reports what it finds.
func ReadAll(ctx context.Context, ociClient Reader, lb string, names []string) map[string]*oci.BackendSet {
	read := make([]*oci.BackendSet, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() { read[i], _ = ociClient.GetBackendSet(ctx, lb, name) })
	}
	wg.Wait()
	out := make(map[string]*oci.BackendSet, len(names))
	for i, name := range names {
		if read[i] != nil {
			out[name] = read[i]
		}
	}
	return out
}

// Backoff spaces the retries of one backend-set write.
type Backoff struct {
	Base, Max time.Duration
	// Attempts bounds the writes tried in one reconcile; after that the
	// reconcile fails and the workqueue's own backoff takes over. A write
	// refused with 412 is not counted: it was refused before any work
	// request because another writer changed the load balancer between
	// the read and the write, so it is read and written again at once; up
	// to Attempts such refusals are allowed besides. Nor is a 409 while
	// another writer's work request is in flight: that is waited for, then
	// the backend set is read and written again, up to Attempts times.
	Attempts int
}

// delay is exponential backoff with full jitter, never shorter than the
// server's Retry-After nor longer than Max: the wait keeps the load
// balancer's lane, so a server asking for more than Max gets Max here, and
// a failing write then hands over to the workqueue's own backoff.
func (b Backoff) delay(attempt int, retryAfter time.Duration) time.Duration {
	d := b.Base << min(attempt, 20)
	if d <= 0 || d > b.Max {
		d = b.Max
	}
	d = time.Duration(rand.Int64N(int64(d)) + 1)
	return min(max(d, retryAfter), b.Max)
}

// Request is one backend set to bring in line.
type Request struct {
	LoadBalancerID string
	Name           string
	// Input returns the plan input for the backend set's current content;
	// called again after every fresh read.
	Input func(current []plan.Backend) plan.Input
	// RecordIntent stores the ownership record ahead of a write that adds backends.
	RecordIntent func(owned []v1beta1.Backend) error
	// Last is the last work request the ownership record keeps for this
	// backend set. One whose outcome was not known when it was recorded
	// (the wait ended first) is looked up before anything else; one that
	// failed makes the next write a new one, not a replay of that failure
	// under its retry token.
	Last *v1beta1.WorkRequest
	// Prefetched, when set, decides whether anything must be written. A
	// write follows a read of its own, because a classic load balancer's
	// ETag changes with every write to any of its backend sets, unless
	// Current says Prefetched's ETag is still current as far as this process
	// knows (read on this turn of the lane with no write since that moves
	// it): a writer outside this process meanwhile gets a 412 and a fresh
	// read.
	Prefetched *oci.BackendSet
	Current    bool
	// WaitTimeout bounds the wait for one work request; the wait goes on
	// for up to ShutdownWait after ctx is cancelled (shutdown), so an
	// accepted write is recorded.
	WaitTimeout  time.Duration
	ShutdownWait time.Duration
	// Turn is the caller's turn on the load balancer's lane; the sync
	// reports its steps there.
	Turn *lanes.Turn
}

// Result is the outcome of a sync.
type Result struct {
	Plan    plan.Plan
	Written bool // a write was accepted
	// WorkRequest is the backend set's last work request as now known:
	// the write's, or the one the record kept, its outcome looked up.
	WorkRequest *v1beta1.WorkRequest
	// NotFound is OCI's 404 saying the load balancer or backend set does
	// not exist (or that this key may not read it).
	NotFound error
}

// Work request states as the ownership record keeps them. ACCEPTED is a
// work request whose outcome is not known yet.
const (
	WorkRequestAccepted  = "ACCEPTED"
	WorkRequestSucceeded = "SUCCEEDED"
	WorkRequestFailed    = "FAILED"
)

// Sync reads, plans and, when something changed, writes one
// backend set with If-Match and waits for its work request, retrying the
// whole read-modify-write on 409, 412, 429, 5xx, network errors and failed
// work requests. A write under way when ctx is cancelled (shutdown) is still
// waited for, so its outcome is recorded rather than lost or repeated.
func Sync(ctx context.Context, ociClient API, b Backoff, req Request) (Result, error) {
	logger := log.FromContext(ctx).WithValues("loadBalancer", req.LoadBalancerID, "backendSet", req.Name)
	res := Result{WorkRequest: lastOutcome(ctx, ociClient, req)}
	// changes plans bs into res and reports whether it must be written.
	changes := func(bs *oci.BackendSet) (plan.Input, bool) {
		in := req.Input(bs.Backends)
		if res.Plan = plan.Compute(in); res.Plan.Changed() {
			return in, true
		}
		logger.V(1).Info("backend set already lists what this resource owns; nothing to write", "mode", in.Mode)
		return in, false
	}
	// current is a read still current, planned already into res.Plan from in.
	var current *oci.BackendSet
	var in plan.Input
	if req.Prefetched != nil {
		var changed bool
		if in, changed = changes(req.Prefetched); !changed {
			return res, nil
		}
		if req.Current {
			current = req.Prefetched
		}
	}
	var tries retries
	for {
		bs, err := current, error(nil)
		if current = nil; bs == nil {
			req.Turn.Step(lanes.Reading, req.Name, "")
			if bs, err = ociClient.GetBackendSet(ctx, req.LoadBalancerID, req.Name); err == nil {
				var changed bool
				if in, changed = changes(bs); !changed {
					return res, nil
				}
			}
		}
		if err == nil {
			if len(res.Plan.Added) > 0 {
				if err := req.RecordIntent(plan.Intent(in.Owned, &res.Plan)); err != nil {
					return res, err
				}
			}
			logger.Info("updating backend set", "mode", in.Mode, "attempt", tries.attempt+1,
				"added", len(res.Plan.Added), "removed", len(res.Plan.Removed), "updated", len(res.Plan.Updated))
			err = write(ctx, ociClient, bs, req, &res)
			if err == nil {
				return res, nil
			}
		}
		if oci.IsNotFound(err) {
			res.NotFound = err
			return res, nil
		}
		if err := tries.again(ctx, logger, ociClient, b, req, err); err != nil {
			return res, err
		}
	}
}

// retries counts Sync's tries of one write: backoffs, re-reads after a
// 412, and waits for other writers after a 409.
type retries struct{ attempt, refused, waits int }

// again decides what follows err, a failed read or write: nil to read and
// write again, once the wait err calls for is over, or the error Sync
// ends with.
func (r *retries) again(ctx context.Context, logger logr.Logger, ociClient API, b Backoff, req Request, err error) error {
	class, after, retry := oci.Retryable(err)
	switch {
	case ctx.Err() != nil:
		return err
	case class == oci.ClassPrecondition && r.refused < b.Attempts:
		r.refused++
		metrics.Retries.WithLabelValues(class).Inc()
		logger.Info("another writer changed the load balancer since the read; reading again", "error", err.Error())
		return nil
	case class == oci.ClassConflict && r.waits < b.Attempts && waitForOthers(ctx, ociClient, req):
		r.waits++
		metrics.Retries.WithLabelValues(class).Inc()
		return nil
	case !retry || r.attempt+1 >= b.Attempts:
		return err
	}
	metrics.Retries.WithLabelValues(class).Inc()
	delay := b.delay(r.attempt, after)
	logger.Info("retrying the backend set write", "class", class, "attempt", r.attempt+1, "delay", delay, "error", err.Error())
	r.attempt++
	req.Turn.Step(lanes.BackingOff, req.Name, "")
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// waitForOthers waits for the work requests of the load balancer that are
// in flight, another writer's when a write of this process was answered
// 409: OCI refuses every write until they end, so retrying meanwhile only
// spends attempts. It reports whether there were any; when none is found
// (or they cannot be listed), the 409 is retried with backoff as usual.
func waitForOthers(ctx context.Context, ociClient API, req Request) bool {
	logger := log.FromContext(ctx).WithValues("loadBalancer", req.LoadBalancerID, "backendSet", req.Name)
	wrs, err := ociClient.WorkRequests(ctx, req.LoadBalancerID)
	if err != nil {
		logger.V(1).Info("listing the load balancer's work requests after a 409 failed; backing off instead", "error", err.Error())
		return false
	}
	ids := oci.InFlight(wrs)
	for _, id := range ids {
		logger.Info("another writer's work request is in flight; waiting for it before writing again", "workRequest", id)
		req.Turn.Step(lanes.WaitingForOthers, req.Name, id)
		waitCtx, cancel := context.WithTimeout(ctx, req.WaitTimeout)
		err := ociClient.WaitWorkRequest(waitCtx, req.LoadBalancerID, id)
		cancel()
		if ctx.Err() != nil {
			return false
		}
		if err != nil && !oci.IsWorkRequestFailed(err) {
			logger.V(1).Info("waiting for another writer's work request ended without its outcome", "workRequest", id, "error", err.Error())
		}
	}
	return len(ids) > 0
}

// lastOutcome looks up the outcome of the record's last work request when the
// record does not know it: a wait that ended first is no failure, the work
// request may well have succeeded since.
func lastOutcome(ctx context.Context, ociClient API, req Request) *v1beta1.WorkRequest {
	last := req.Last
	if last == nil || last.Status == WorkRequestSucceeded || last.Status == WorkRequestFailed {
		return last
	}
	waitCtx, cancel := context.WithTimeout(ctx, req.WaitTimeout)
	defer cancel()
	err := ociClient.WaitWorkRequest(waitCtx, req.LoadBalancerID, last.ID)
	switch {
	case err == nil:
		return &v1beta1.WorkRequest{ID: last.ID, Status: WorkRequestSucceeded, Time: metav1.Now()}
	case oci.IsWorkRequestFailed(err):
		return &v1beta1.WorkRequest{ID: last.ID, Status: WorkRequestFailed, Time: metav1.Now()}
	}
	log.FromContext(ctx).Info("the outcome of the last work request is still not known", "loadBalancer", req.LoadBalancerID,
		"backendSet", req.Name, "workRequest", last.ID, "error", err.Error())
	return last
}

// failedID is wr's id when it failed, "" otherwise.
func failedID(wr *v1beta1.WorkRequest) string {
	if wr != nil && wr.Status == WorkRequestFailed {
		return wr.ID
	}
	return ""
}

func write(ctx context.Context, ociClient API, bs *oci.BackendSet, req Request, res *Result) error {
	logger := log.FromContext(ctx).WithValues("loadBalancer", req.LoadBalancerID, "backendSet", req.Name)
	if err := ctx.Err(); err != nil {
		return err // shutting down: a write not begun is left to the next leader
	}
	// A write begun outlives ctx by ShutdownWait: OCI may have accepted it
	// before its answer arrives, so the answer is read and its work request
	// waited for, and the outcome recorded rather than lost or repeated.
	inFlight, land := context.WithCancel(context.WithoutCancel(ctx))
	defer land()
	stopGrace := context.AfterFunc(ctx, func() {
		logger.Info("shutting down; still finishing the write under way", "atMost", req.ShutdownWait)
		time.AfterFunc(req.ShutdownWait, land)
	})
	defer stopGrace()
	req.Turn.Step(lanes.Writing, req.Name, "")
	start := time.Now()
	id, err := ociClient.UpdateBackendSet(inFlight, bs, res.Plan.Backends, failedID(res.WorkRequest))
	if err != nil {
		return err
	}
	req.Turn.Step(lanes.Waiting, req.Name, id)
	logger.V(1).Info("write accepted; waiting for its work request", "workRequest", id)
	res.Written = true
	res.WorkRequest = &v1beta1.WorkRequest{ID: id, Status: WorkRequestAccepted, Time: metav1.Now()}
	waitCtx, cancel := context.WithTimeout(inFlight, req.WaitTimeout)
	defer cancel()
	if err := ociClient.WaitWorkRequest(waitCtx, bs.LoadBalancerID, id); err != nil {
		if oci.IsWorkRequestFailed(err) {
			res.WorkRequest.Status, res.WorkRequest.Time = WorkRequestFailed, metav1.Now()
			logger.Info("work request failed", "workRequest", id, "duration", time.Since(start), "error", err.Error())
		} else {
			logger.Info("the work request's outcome is not known; it is looked up next time", "workRequest", id, "duration", time.Since(start), "error", err.Error())
		}
		return err
	}
	res.WorkRequest.Status = WorkRequestSucceeded
	res.WorkRequest.Time = metav1.Now()
	logger.Info("backend set updated", "workRequest", id, "duration", time.Since(start))
	return nil
}

// HealthReader is what reading backend sets' health needs from OCI.
type HealthReader interface {
	GetBackendSetHealth(ctx context.Context, loadBalancerID, name string) (*oci.BackendSetHealth, error)
}

// ReadHealth reads the health of the named backend sets, one read each,
// all at once. Health only informs: a backend set whose read failed is
// left out, and the failure logged, nothing more.
func ReadHealth(ctx context.Context, ociClient HealthReader, lb string, names []string) map[string]*oci.BackendSetHealth {
	logger := log.FromContext(ctx).WithValues("loadBalancer", lb)
	ctx = oci.Yielding(ctx) // the writes are done; others' come first
	read := make(map[string]*oci.BackendSetHealth, len(names))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, name := range names {
		wg.Go(func() {
			h, err := ociClient.GetBackendSetHealth(ctx, lb, name)
			if err != nil {
				logger.Info("could not read the backend set's health; its status shows none", "backendSet", name, "error", err.Error())
				return
			}
			mu.Lock()
			read[name] = h
			mu.Unlock()
		})
	}
	wg.Wait()
	return read
}
