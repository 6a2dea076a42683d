package reconciler

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/reconciler/decide"
)

// holdWrites is write under --dry-run: it plans every job as lbregistrar
// plan does and, instead of writing, reports each write it would make as an
// Event, in lbregistrar_pending_writes and the lanes view, and in out for
// the Ready condition. The ownership record stays as it is.
func (r *Reconciler) holdWrites(ctx context.Context, s *scope, jobs []decide.Job) {
	obj, out := s.obj, &s.out
	changes := decide.Preview(ctx, s.oci, obj, s.lb, jobs, out)
	for i := range changes {
		c := &changes[i]
		if !c.Changed() {
			continue
		}
		out.Pending = append(out.Pending, fmt.Sprintf("backend set %q: %s", c.BackendSet, c.Details()))
		r.events.Eventf(obj, nil, corev1.EventTypeNormal, v1beta1.ReasonDryRun, "UpdateBackendSet",
			"dry run, not written: backend set %q: %s", c.BackendSet, c.Details())
	}
	r.pending.Set(obj.Name, s.lb, changes)
}
