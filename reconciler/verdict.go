package reconciler

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/reconciler/backendset"
	"github.com/peppy-ratio/lbregistrar/reconciler/decide"
	"github.com/peppy-ratio/lbregistrar/reconciler/desired"
	"github.com/peppy-ratio/lbregistrar/reconciler/metrics"
	"github.com/peppy-ratio/lbregistrar/reconciler/oci"
	"github.com/peppy-ratio/lbregistrar/reconciler/plan"
	"github.com/peppy-ratio/lbregistrar/reconciler/status"
)

// ending is how one backend set's sync ended. Retries within the sync
// (409, 412, 429, 5xx, failed work requests) are over by then: see
// backendset.Sync.
type ending int

const (
	// inLine: the backend set has what the record says. The record takes
	// the plan's owned and draining backends, and the resource is revisited
	// when the first drain is over.
	inLine ending = iota
	// refused: OCI refused the write for what it adds (oci.IsRefused: bad
	// input, a limit), which sending it again cannot help. The backend set
	// is written again at once without the additions, which are tried again
	// with backoff (backendset.Refusals). A deletion adds nothing: its
	// refusals fail, and are retried until its cleanup timeout.
	refused
	// failed: the write failed; the flight fails, and the resource is
	// retried with backoff.
	failed
	// gone: OCI answered 404 to a write that only takes backends out:
	// nothing is left to remove, and the record goes.
	gone
	// missing: OCI answered 404 to a write that registers. It answers so
	// alike for a backend set that does not exist and for one this identity
	// may not read yet (a policy still propagating), so the resource is
	// retried with the workqueue's backoff: soon at first, then rarely.
	missing
	// emptied: a write that only takes backends out left none owned, and
	// the record goes.
	emptied
)

// verdict is what a sync's ending changes, decided by judge from the sync
// alone and carried out by carryOut.
type verdict struct {
	kind ending
	err  error // refused, failed, missing: why
	// inLine only: the plan as the record takes it, its drains counted from
	// when the write that started them ended; whether a refusal of the
	// backend set's additions is over; how many backends are wanted there
	// and how many OCI allows; and what the status warns of.
	plan          plan.Plan
	clearsRefusal bool
	wanted, limit int
	issues        []desired.Issue
}

// judge says what the sync of w, which returned res and err, changes.
// deleting: the resource is being deleted.
func judge(w *setWrite, deleting bool, res backendset.Result, err error) verdict {
	mode := w.job.Mode
	switch {
	case oci.IsRefused(err) && !deleting && len(res.Plan.Added) > 0:
		return verdict{kind: refused, err: err}
	case err != nil:
		return verdict{kind: failed, err: err}
	case res.NotFound != nil && mode.Leaves():
		return verdict{kind: gone}
	case res.NotFound != nil:
		return verdict{kind: missing, err: res.NotFound}
	case (mode == plan.Remove || mode == plan.Retire) && len(res.Plan.Owned) == 0:
		return verdict{kind: emptied}
	}
	p := res.Plan
	if res.Written {
		p.Draining = slices.Clone(p.Draining)
		p.DrainTookEffect(res.WorkRequest.Time.Time, w.job.DrainFor)
	}
	v := verdict{kind: inLine, plan: p, clearsRefusal: !w.noAdds,
		wanted: len(p.Backends) + len(p.Withheld), limit: w.read.BackendLimit(0)}
	for _, is := range []*desired.Issue{status.NearLimit(w.job.Name, v.wanted, v.limit), status.InstanceRegistered(w.job.Name, p.InstanceTaken)} {
		if is != nil {
			v.issues = append(v.issues, *is)
		}
	}
	return v
}

// carryOut applies v to the resource's record and outcome, the events,
// the metrics and what the process remembers of the backend set.
func (r *Reconciler) carryOut(ctx context.Context, s *scope, w *setWrite, res *backendset.Result, v verdict) {
	obj, name := s.obj, w.job.Name
	logger := s.logger.WithValues("backendSet", name)
	if res.WorkRequest != nil {
		status.Entry(obj, name).LastWorkRequest = res.WorkRequest
	}
	if res.Written && v.kind != refused && v.kind != failed {
		r.events.Eventf(obj, nil, corev1.EventTypeNormal, v1beta1.ReasonBackendSetUpdated, "UpdateBackendSet",
			"backend set %q: %d added, %d removed, %d updated (work request %s)",
			name, len(res.Plan.Added), len(res.Plan.Removed), len(res.Plan.Updated), res.WorkRequest.ID)
		if w.job.Mode.Leaves() {
			r.wakeClaimants(ctx, obj, s.lb, name)
		}
	}
	switch v.kind {
	case refused:
		last := r.opts.Resync
		if last <= 0 {
			last = 10 * time.Minute
		}
		retryAt := r.refusals.Put(obj.Name, name, obj.Generation, res.Plan.Added, v.err, time.Now(), r.opts.Backoff.Max, last)
		logger.Error(v.err, "OCI refused the write; writing the backend set without its additions, which are tried again later",
			"opcRequestID", oci.RequestID(v.err), "withheld", len(res.Plan.Added), "retryAt", retryAt)
		w.blocked = s.out.Refused(name, len(res.Plan.Added), v.err, retryAt)
		r.events.Eventf(obj, nil, corev1.EventTypeWarning, v1beta1.ReasonWriteRefused, "UpdateBackendSet", "%s", w.blocked)
		return // written again at once, which sets what follows
	case failed:
		logger.Error(v.err, "backend set write failed", "opcRequestID", oci.RequestID(v.err))
		r.events.Eventf(obj, nil, corev1.EventTypeWarning, v1beta1.ReasonWriteFailed, "UpdateBackendSet", "backend set %q: %v", name, v.err)
		s.out.Fail(name, v.err)
		w.blocked = "the last write failed: " + v.err.Error()
	case gone:
		logger.V(1).Info("backend set or load balancer gone; nothing left to remove")
		status.DropEntry(obj, name)
	case missing:
		missing := fmt.Errorf("%s: %w", decide.MissingBackendSet(name, s.lb, v.err), v.err)
		logger.Error(missing, "registering nothing there until it exists")
		w.blocked = missing.Error()
		s.out.Missing(missing.Error(), v.err)
	case emptied:
		status.DropEntry(obj, name)
		r.waiters.Set(s.lb, obj.Name, name, 0)
	case inLine:
		rec := status.Entry(obj, name)
		rec.SetOwned(v.plan.Owned)
		rec.SetDraining(v.plan.Draining)
		s.out.Revisit(v.plan.DrainsUntil)
		s.out.Issues = append(s.out.Issues, v.issues...)
		if n := len(v.plan.Withheld) + len(v.plan.InstanceTaken); n > 0 {
			w.blocked = cmp.Or(w.blocked, fmt.Sprintf("%d wanted backends are left out (OCI's backend limit, or their instance registered at another address by another writer): %s",
				n, desired.Summarize(append(slices.Clone(v.plan.Withheld), v.plan.InstanceTaken...))))
		}
		if v.clearsRefusal {
			r.refusals.Clear(obj.Name, name)
		}
		r.waiters.Set(s.lb, obj.Name, name, len(v.plan.Withheld))
		if len(v.plan.Removed) > 0 {
			r.wakeWaiters(obj.Name, s.lb)
		}
		metrics.BackendsWithheld.WithLabelValues(obj.Name, name).Set(float64(len(v.plan.Withheld)))
		// A load balancer full of other sets' backends leaves a limit of 0.
		metrics.BackendLimitUsed.WithLabelValues(obj.Name, name).Set(float64(v.wanted) / float64(max(v.limit, 1)))
		metrics.NodeDrains.WithLabelValues("started").Add(float64(len(v.plan.DrainStarted)))
		metrics.NodeDrains.WithLabelValues("ended").Add(float64(len(v.plan.DrainEnded)))
		metrics.NodeDrains.WithLabelValues("called_off").Add(float64(len(v.plan.DrainCalledOff)))
		r.drains.Set(obj.Name, s.lb, name, &v.plan, w.job.DrainFor)
	}
	if rec := status.FindEntry(obj, name); rec != nil {
		metrics.BackendsRegistered.WithLabelValues(obj.Name, name).Set(float64(rec.OwnedCount()))
		metrics.BackendsDraining.WithLabelValues(obj.Name, name).Set(float64(len(rec.DrainingBackends())))
		return
	}
	metrics.ForgetBackendSet(obj.Name, name)
	r.drains.Set(obj.Name, s.lb, name, nil, 0)
}

// wakeClaimants reconciles the other live claimants of (lb, name) again
// after obj drained or removed backends there. The write's plan spared what
// they record as theirs, as the cache showed it; one that took a backend
// over since (its record not in the cache yet) finds it drained or gone on
// its own read and puts it back, at once rather than at its resync.
func (r *Reconciler) wakeClaimants(ctx context.Context, obj *v1beta1.LBRegistrar, lb, name string) {
	others, err := r.claimantsOf(ctx, obj)(lb, name)
	if err != nil {
		return // each is reconciled at its resync anyway
	}
	for i := range others {
		if others[i].DeletionTimestamp.IsZero() {
			r.wakeups.Wake(others[i].Name)
		}
	}
}

// wakeWaiters reconciles again, after obj removed backends from lb, the
// other resources waiting for room there (backendset.Waiters): the room is
// kept for them, and they take it at once rather than at their retry.
func (r *Reconciler) wakeWaiters(obj, lb string) {
	for _, name := range r.waiters.Of(lb) {
		if name != obj {
			r.wakeups.Wake(name)
		}
	}
}
