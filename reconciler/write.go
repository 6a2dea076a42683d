package reconciler

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/reconciler/backendset"
	"github.com/peppy-ratio/lbregistrar/reconciler/decide"
	"github.com/peppy-ratio/lbregistrar/reconciler/desired"
	"github.com/peppy-ratio/lbregistrar/reconciler/lanes"
	"github.com/peppy-ratio/lbregistrar/reconciler/metrics"
	"github.com/peppy-ratio/lbregistrar/reconciler/oci"
	"github.com/peppy-ratio/lbregistrar/reconciler/plan"
	"github.com/peppy-ratio/lbregistrar/reconciler/status"
)

// ociAPI is what a reconcile needs from OCI; *oci.Client implements it.
type ociAPI interface {
	backendset.API
	backendset.HealthReader
}

// write brings the backend sets of the load balancer whose lane is held, one
// write at a time, as OCI requires, sparing what decide found other
// resources record there. Reads to plan (those not done already)
// and the intent record are done first, for all of them at once, so the
// writes follow each other with only the read each needs for a current ETag
// in between.
func (r *Reconciler) write(ctx context.Context, ociClient ociAPI, st *status.Writer, out *status.Outcome, turn *lanes.Turn, jobs []decide.Job) {
	obj, lb := st.Object(), turn.LoadBalancerID()
	logger := log.FromContext(ctx).WithValues("loadBalancer", lb)
	turn.Step(lanes.Reading, "", "")
	if r.opts.DryRun {
		r.holdWrites(ctx, ociClient, obj, lb, out, jobs)
		return
	}
	var unread []string
	for i := range jobs {
		j := &jobs[i]
		if j.Err != nil {
			logger.Error(j.Err, "listing the other claimants of the backend set", "backendSet", j.Name)
			continue
		}
		if j.Prefetched == nil {
			unread = append(unread, j.Name)
		}
	}
	read := backendset.ReadAll(ctx, ociClient, lb, unread)
	for i := range jobs {
		if bs := read[jobs[i].Name]; bs != nil {
			jobs[i].Prefetched = bs
		}
	}
	var changing []string
	for i := range jobs {
		j := &jobs[i]
		if j.Prefetched == nil {
			continue
		}
		in := j.Input(obj, j.Prefetched.Backends)
		p := plan.Compute(in)
		if rej := r.refusals.InForce(obj.Name, j.Name, obj.Generation, p.Added, time.Now()); rej != nil && obj.DeletionTimestamp.IsZero() {
			logger.V(1).Info("OCI refused adding these backends; the backend set is written without them until their retry", "backendSet", j.Name,
				"withheld", len(p.Added), "retryAt", rej.RetryAt, "error", rej.Err.Error())
			out.Refused(j.Name, len(p.Added), rej.Err, rej.RetryAt)
			j.NoAdds = true
			in = j.Input(obj, j.Prefetched.Backends)
			p = plan.Compute(in)
		}
		if !p.Changed() {
			continue
		}
		j.Changing = true
		changing = append(changing, j.Name)
		if len(p.Added) > 0 {
			status.Record(obj, j.Name).SetOwned(plan.Intent(in.Owned, &p))
		}
	}
	r.status.WarnLargeRecord(obj)
	if len(changing) > 0 && obj.DeletionTimestamp.IsZero() {
		status.SetCondition(obj, v1beta1.ConditionReady, metav1.ConditionFalse, v1beta1.ReasonRegistering,
			"writing backend sets "+strings.Join(changing, ", "))
	}
	if err := st.Flush(ctx); err != nil {
		logger.Error(err, "recording the intended ownership; nothing written", "backendSets", changing)
		out.Fail("*", err)
		return
	}
	// Health is read for the backend sets that now hold what this resource
	// keeps registered: one whose write failed may lack backends the record
	// names, which OCI's health, listing only the backends it has, would
	// count as OK; and backends being drained or removed are on their way out.
	var inLine []string
	current := true // no write since the reads above
	for i := range jobs {
		j := &jobs[i]
		if j.Err != nil {
			continue
		}
		if r.writeOne(ctx, ociClient, st, out, turn, j, current) && (j.Mode == plan.Apply || j.Mode == plan.Hold) {
			inLine = append(inLine, j.Name)
		}
		current = current && !j.Changing
	}
	switch {
	case !r.opts.BackendHealth:
		status.RecordHealth(obj, nil, out) // nothing read; health an earlier run recorded is cleared
	case r.flights.Awaited(obj.Name):
		// A reconcile is parked behind this one (a change came in during
		// the writes): it reads health after its own writes, moments from
		// now, and the status keeps what was read before until then.
		status.KeepHealth(obj, out)
	default:
		status.RecordHealth(obj, backendset.ReadHealth(ctx, ociClient, lb, inLine), out)
	}
}

// writeOne brings one backend set in line and folds the result into the status and
// outcome. It reports whether the backend set now holds what the record says.
func (r *Reconciler) writeOne(ctx context.Context, ociClient ociAPI, st *status.Writer, out *status.Outcome, turn *lanes.Turn, j *decide.Job, current bool) bool {
	obj, name, mode, lb := st.Object(), j.Name, j.Mode, turn.LoadBalancerID()
	logger := log.FromContext(ctx).WithValues("loadBalancer", lb, "backendSet", name)
	res, err := backendset.Sync(ctx, ociClient, r.opts.Backoff, backendset.Request{
		LoadBalancerID: lb,
		Name:           name,
		Prefetched:     j.Prefetched,
		Current:        current,
		Last:           status.LastWorkRequest(obj, name),
		WaitTimeout:    r.opts.WorkRequestTimeout,
		ShutdownWait:   r.opts.ShutdownWait,
		Turn:           turn,
		Input:          func(current []plan.Backend) plan.Input { return j.Input(obj, current) },
		RecordIntent: func(owned []v1beta1.Backend) error {
			rec := status.Record(obj, name)
			if slices.Equal(rec.Owned(), owned) {
				return nil // recorded ahead, by write
			}
			rec.SetOwned(owned)
			return st.Flush(ctx)
		},
	})
	if res.WorkRequest != nil {
		status.Record(obj, name).LastWorkRequest = res.WorkRequest
	}
	if res.Written && err == nil {
		r.events.Eventf(obj, nil, corev1.EventTypeNormal, "BackendSetUpdated", "UpdateBackendSet",
			"backend set %q: %d added, %d removed, %d updated (work request %s)",
			name, len(res.Plan.Added), len(res.Plan.Removed), len(res.Plan.Updated), res.WorkRequest.ID)
		if mode.Leaves() {
			r.wakeClaimants(ctx, obj, lb, name)
		}
	}
	inLine := false
	switch {
	case oci.IsRefused(err) && obj.DeletionTimestamp.IsZero() && len(res.Plan.Added) > 0:
		// Sending it again cannot help, but what it removes, re-weights or
		// drains must not wait for what it adds: that goes now, and the
		// additions are tried again with backoff (see backendset.Refusals). Deletion
		// adds nothing, and retries until its cleanup timeout.
		last := r.opts.Resync
		if last <= 0 {
			last = 10 * time.Minute
		}
		retryAt := r.refusals.Put(obj.Name, name, obj.Generation, res.Plan.Added, err, time.Now(), r.opts.Backoff.Max, last)
		logger.Error(err, "OCI refused the write; writing the backend set without its additions, which are tried again later",
			"opcRequestID", oci.RequestID(err), "withheld", len(res.Plan.Added), "retryAt", retryAt)
		r.events.Eventf(obj, nil, corev1.EventTypeWarning, status.ReasonWriteFailed, "UpdateBackendSet", "%s", out.Refused(name, len(res.Plan.Added), err, retryAt))
		j.NoAdds = true
		return r.writeOne(ctx, ociClient, st, out, turn, j, false)
	case err != nil:
		logger.Error(err, "backend set write failed", "opcRequestID", oci.RequestID(err))
		r.events.Eventf(obj, nil, corev1.EventTypeWarning, status.ReasonWriteFailed, "UpdateBackendSet", "backend set %q: %v", name, err)
		out.Fail(name, err)
	case res.NotFound != nil && mode.Leaves():
		logger.V(1).Info("backend set or load balancer gone; nothing left to remove")
		status.DropRecord(obj, name)
	case res.NotFound != nil:
		// OCI answers 404 alike for a backend set that does not exist and for
		// one this key may not read yet (a policy still propagating), so it
		// is retried with the workqueue's backoff: soon at first, then
		// rarely, and found soon after either changes.
		missing := fmt.Errorf("%s: %w", decide.MissingBackendSet(name, lb), res.NotFound)
		logger.Error(missing, "registering nothing there until it exists")
		out.Failures = append(out.Failures, missing.Error())
		if out.Err == nil {
			out.Err = missing
		}
	case (mode == plan.Remove || mode == plan.Retire) && len(res.Plan.Owned) == 0:
		status.DropRecord(obj, name)
	default:
		if res.Written {
			res.Plan.DrainTookEffect(res.WorkRequest.Time.Time, j.DrainFor)
		}
		rec := status.Record(obj, name)
		rec.SetOwned(res.Plan.Owned)
		rec.SetDraining(res.Plan.Draining)
		out.Revisit(res.Plan.DrainsUntil)
		if !j.NoAdds {
			r.refusals.Clear(obj.Name, name)
		}
		metrics.BackendsWithheld.WithLabelValues(obj.Name, name).Set(float64(len(res.Plan.Withheld)))
		wanted, limit := len(res.Plan.Backends)+len(res.Plan.Withheld), j.Prefetched.BackendLimit()
		metrics.BackendLimitUsed.WithLabelValues(obj.Name, name).Set(float64(wanted) / float64(limit))
		for _, is := range []*desired.Issue{status.NearLimit(name, wanted, limit), status.InstanceRegistered(name, res.Plan.InstanceTaken)} {
			if is != nil {
				out.Issues = append(out.Issues, *is)
			}
		}
		r.drains.set(obj.Name, lb, name, &res.Plan, j.DrainFor)
		metrics.NodeDrains.WithLabelValues("started").Add(float64(len(res.Plan.DrainStarted)))
		metrics.NodeDrains.WithLabelValues("ended").Add(float64(len(res.Plan.DrainEnded)))
		metrics.NodeDrains.WithLabelValues("called_off").Add(float64(len(res.Plan.DrainCalledOff)))
		inLine = true
	}
	if rec := status.FindRecord(obj, name); rec != nil {
		metrics.BackendsRegistered.WithLabelValues(obj.Name, name).Set(float64(rec.OwnedCount()))
		metrics.BackendsDraining.WithLabelValues(obj.Name, name).Set(float64(len(rec.DrainingBackends())))
	} else {
		metrics.BackendsRegistered.DeleteLabelValues(obj.Name, name)
		metrics.BackendsDraining.DeleteLabelValues(obj.Name, name)
		metrics.BackendsWithheld.DeleteLabelValues(obj.Name, name)
		metrics.BackendLimitUsed.DeleteLabelValues(obj.Name, name)
		r.drains.set(obj.Name, lb, name, nil, 0)
	}
	return inLine
}
