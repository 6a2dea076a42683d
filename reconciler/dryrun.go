package reconciler

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/reconciler/backendset"
	"github.com/peppy-ratio/lbregistrar/reconciler/oci"
	"github.com/peppy-ratio/lbregistrar/reconciler/plan"
	"github.com/peppy-ratio/lbregistrar/reconciler/preview"
	"github.com/peppy-ratio/lbregistrar/reconciler/status"
)

// holdWrites is syncAll under --dry-run: it plans every job as lbregistrar
// plan does and, instead of writing, reports each write it would make as an
// Event, in lbregistrar_pending_writes and the lanes view, and in out for
// the Ready condition. The ownership record stays as it is.
func (r *Reconciler) holdWrites(ctx context.Context, read backendset.Reader, obj *v1beta1.LBRegistrar, lb string, out *status.Outcome, jobs []syncJob) {
	changes := planJobs(ctx, read, obj, lb, jobs, r.claimantsOf(ctx, obj), out)
	for i := range changes {
		c := &changes[i]
		if !c.Changed() {
			continue
		}
		out.Pending = append(out.Pending, fmt.Sprintf("backend set %q: %s", c.BackendSet, c.Details()))
		r.events.Eventf(obj, nil, corev1.EventTypeNormal, status.ReasonDryRun, "UpdateBackendSet",
			"dry run, not written: backend set %q: %s", c.BackendSet, c.Details())
	}
	r.pending.Set(obj.Name, lb, changes)
}

// planJobs plans each job's backend set of lb over what OCI holds, as a
// sync does, and writes nothing. What a sync would report as failed goes
// into out as the sync puts it.
func planJobs(ctx context.Context, read backendset.Reader, obj *v1beta1.LBRegistrar, lb string, jobs []syncJob, claimants claimantsFunc, out *status.Outcome) []preview.BackendSetChange {
	// Planning adds empty ownership records, which stay in this copy.
	obj = obj.DeepCopy()
	changes := make([]preview.BackendSetChange, 0, len(jobs))
	for _, j := range jobs {
		c := preview.BackendSetChange{LBRegistrar: obj.Name, LoadBalancerID: lb, BackendSet: j.name, Mode: j.mode.String()}
		bs, err := j.prefetched, error(nil)
		if bs == nil { // not read yet, or its read failed: read again for the error
			bs, err = read.GetBackendSet(ctx, lb, j.name)
		}
		if err == nil {
			j.protected, err = protectedBy(claimants, lb, j.name)
		}
		switch {
		case oci.IsNotFound(err):
			c.NotFound = true
			if j.mode != plan.Remove && j.mode != plan.Drain { // nothing left to remove counts as done
				out.Failures = append(out.Failures, missingBackendSet(j.name, lb))
			}
		case err != nil:
			c.Error = err.Error()
			out.Fail(j.name, err)
		default:
			p := plan.Compute(j.input(obj, bs.Backends))
			c = preview.Describe(c, bs.Backends, &p, j.drainFor)
		}
		changes = append(changes, c)
	}
	return changes
}

// missingBackendSet says that a backend set to register in does not exist.
func missingBackendSet(name, lb string) string {
	return fmt.Sprintf("backend set %q not found in load balancer %s", name, lb)
}
