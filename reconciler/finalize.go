package reconciler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/reconciler/backendset"
	"github.com/peppy-ratio/lbregistrar/reconciler/credentials"
	"github.com/peppy-ratio/lbregistrar/reconciler/decide"
	"github.com/peppy-ratio/lbregistrar/reconciler/plan"
	"github.com/peppy-ratio/lbregistrar/reconciler/status"
)

func (r *Reconciler) finalize(ctx context.Context, obj *v1beta1.LBRegistrar) (ctrl.Result, error) {
	r.pending.Forget(obj.Name)
	r.watch.Forget(obj.Name)
	// A dry run writes nothing, so it neither deregisters nor releases the
	// finalizer a writing controller added; that one finishes the job.
	if !controllerutil.ContainsFinalizer(obj, Finalizer) || r.opts.DryRun {
		return ctrl.Result{}, nil
	}
	logger := log.FromContext(ctx).WithValues("loadBalancer", recordedLoadBalancer(obj))
	why, err := r.orphanedOnDeletion(ctx, obj)
	if err != nil {
		return ctrl.Result{}, err
	}
	if why != "" {
		logger.Info("deleted; its backends stay registered", "why", why, "backendSets", len(obj.Status.BackendSets))
		r.events.Eventf(obj, nil, corev1.EventTypeNormal, v1beta1.ReasonBackendsKept, "Delete",
			"deleted with its backends left registered in load balancer %s: %s; remove them on purpose (docs/operations.md, Uninstalling)", recordedLoadBalancer(obj), why)
		return ctrl.Result{}, r.releaseFinalizer(ctx, obj)
	}
	st, err := r.status.Open(ctx, obj)
	if err != nil {
		return ctrl.Result{}, err
	}

	var out status.Outcome
	if !ownsBackends(obj) {
		return r.deregistered(ctx, st, &out)
	}
	ociClient, err := r.ociClientFor(ctx, obj)
	if err != nil {
		out.Fail("*", err)
		return r.deregistered(ctx, st, &out)
	}
	return r.fly(ctx, st, ociClient, recordedLoadBalancer(obj), r.deregister)
}

// deregister drains obj's owned backends for the drain period, then removes
// them, on its turn of the lane.
func (r *Reconciler) deregister(ctx context.Context, s *scope) (ctrl.Result, error) {
	obj, logger := s.obj, s.logger
	drainUntil := r.drainEnds(obj)
	mode := plan.Remove
	if time.Now().Before(drainUntil) {
		mode = plan.Drain
	}
	var names []string
	for _, rec := range obj.Status.BackendSets {
		names = append(names, rec.Name)
	}
	if mode == plan.Drain {
		logger.Info("deleted: draining this resource's backends before removing them", "backendSets", names, "until", drainUntil.UTC().Format(time.RFC3339))
	} else {
		logger.Info("deleted: removing this resource's backends", "backendSets", names)
	}
	jobs := decide.Removals(obj, s.lb, mode, 0, r.claimantsOf(ctx, obj), &s.out)
	r.write(ctx, s, jobs)
	if mode == plan.Drain && s.out.Err == nil {
		for i := range obj.Status.BackendSets {
			obj.Status.BackendSets[i].Drained = true
		}
		drainUntil = r.drainEnds(obj)
	}
	// What another resource now records, or OCI no longer has registered, left the
	// record in the sync: only backends still owned wait.
	if s.out.Err == nil && mode == plan.Drain && ownsBackends(obj) {
		s.out.Phase = &status.Failure{Reason: v1beta1.ReasonDeleting,
			Message: fmt.Sprintf("draining owned backends until %s, then removing them", drainUntil.UTC().Format(time.RFC3339))}
		status.SetConditions(obj, &s.out)
		// The writes may have outlasted the period: a requeue of zero or
		// less would be none at all, and the removal would wait for the
		// resync.
		return ctrl.Result{RequeueAfter: max(time.Until(drainUntil), 0) + 100*time.Millisecond}, s.st.Flush(ctx)
	}
	return r.deregistered(ctx, s.st, &s.out)
}

// drainEnds is when the drain of deleted obj's backends is over: the drain
// period counted from when the drain took effect, the end of the work
// request that drained them (one can take 30 s and more, most of a short
// period), or now while its outcome is not known. The record is the
// controller's own, and a drain's work request is not waited for longer
// than the work request timeout: it starts no later than that after the
// deletion.
func (r *Reconciler) drainEnds(obj *v1beta1.LBRegistrar) time.Time {
	deleted := obj.DeletionTimestamp.Time
	start := deleted
	for _, rec := range obj.Status.BackendSets {
		wr := rec.LastWorkRequest
		switch {
		case !rec.Drained || wr == nil:
		case wr.Status == backendset.WorkRequestAccepted:
			start = latest(start, time.Now())
		case wr.Status == backendset.WorkRequestSucceeded:
			start = latest(start, wr.Time.Time)
		}
	}
	if bound := deleted.Add(r.opts.WorkRequestTimeout); start.After(bound) {
		start = bound
	}
	return start.Add(r.opts.decide().DrainFor(plan.ResourceDeleted))
}

func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// deregistered removes the finalizer once nothing owned is left, or once
// the cleanup timeout has passed; until then a failed cleanup is retried.
func (r *Reconciler) deregistered(ctx context.Context, st *status.Writer, out *status.Outcome) (ctrl.Result, error) {
	obj := st.Object()
	logger := log.FromContext(ctx).WithValues("loadBalancer", recordedLoadBalancer(obj))
	deleted := obj.DeletionTimestamp.Time
	if out.Err != nil {
		if time.Now().Before(deleted.Add(r.opts.CleanupTimeout)) {
			logger.Error(out.Err, "cleanup failed; retrying until the cleanup timeout",
				"failures", out.Failures, "giveUpAt", deleted.Add(r.opts.CleanupTimeout).UTC().Format(time.RFC3339))
			out.Phase = &status.Failure{Reason: v1beta1.ReasonDeleting, Message: "cleanup failed, retrying"}
			status.SetConditions(obj, out)
			if err := st.Flush(ctx); err != nil {
				logger.Error(err, "recording cleanup failure")
			}
			var ce *credentials.Error
			if errors.As(out.Err, &ce) {
				return ctrl.Result{RequeueAfter: min(30*time.Second, time.Until(deleted.Add(r.opts.CleanupTimeout)))}, nil
			}
			return ctrl.Result{}, out.Err
		}
		logger.Error(out.Err, "cleanup timeout passed; removing the finalizer anyway, backends may remain",
			"failures", out.Failures, "cleanupTimeout", r.opts.CleanupTimeout)
		r.events.Eventf(obj, nil, corev1.EventTypeWarning, v1beta1.ReasonCleanupAbandoned, "Deregister",
			"gave up deregistering after %s; backends may remain: %s", r.opts.CleanupTimeout, out.Messages())
	}
	logger.Info("deregistered; removing the finalizer")
	return ctrl.Result{}, r.releaseFinalizer(ctx, obj)
}

// releaseFinalizer lets the API server delete obj.
func (r *Reconciler) releaseFinalizer(ctx context.Context, obj *v1beta1.LBRegistrar) error {
	base := obj.DeepCopy()
	controllerutil.RemoveFinalizer(obj, Finalizer)
	return client.IgnoreNotFound(r.client.Patch(ctx, obj, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})))
}

// orphanedOnDeletion says why deleted obj's backends stay registered
// (decide.Orphans, or the CRD being deleted), or "" when they are drained and
// removed. Deleting the CRD deletes every LBRegistrar, and an uninstall
// (kubectl delete -k, helm uninstall, or the original operator's install
// manifest, which contains the same CRD) is no request to deregister anything.
func (r *Reconciler) orphanedOnDeletion(ctx context.Context, obj *v1beta1.LBRegistrar) (string, error) {
	if why := decide.Orphans(obj); why != "" {
		return why, nil
	}
	// A CRD that is gone cannot have obj: read as not being deleted.
	crd := &metav1.PartialObjectMetadata{}
	crd.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
	err := r.apiReader.Get(ctx, client.ObjectKey{Name: CRDName}, crd)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return "", fmt.Errorf("reading the LBRegistrar CRD, to learn whether it is being deleted: %w", err)
	case !crd.DeletionTimestamp.IsZero():
		return "the LBRegistrar CRD is being deleted", nil
	}
	return "", nil
}

// CRDName is the name of the LBRegistrar CRD.
var CRDName = "lbregistrars." + v1beta1.GroupVersion.Group

// ownsBackends reports whether obj's ownership record lists any backend.
func ownsBackends(obj *v1beta1.LBRegistrar) bool {
	return slices.ContainsFunc(obj.Status.BackendSets, func(bs v1beta1.BackendSetStatus) bool { return bs.OwnedCount() > 0 })
}

// recordedLoadBalancer is the load balancer obj's ownership record refers
// to; records written before status.loadBalancerId existed refer to the spec's.
func recordedLoadBalancer(obj *v1beta1.LBRegistrar) string {
	if obj.Status.LoadBalancerID != "" {
		return obj.Status.LoadBalancerID
	}
	return obj.Spec.LoadBalancerID
}

// moving says whether obj's record refers to a load balancer its spec no
// longer names, where it has backends to take out before anything is
// registered in the new one.
func moving(obj *v1beta1.LBRegistrar) bool {
	return recordedLoadBalancer(obj) != obj.Spec.LoadBalancerID && len(obj.Status.BackendSets) > 0
}

// move leaves the load balancer obj's record refers to, on a turn of its
// lane, as every other write runs: no reconcile worker waits while OCI
// works.
func (r *Reconciler) move(ctx context.Context, ociClient ociAPI, st *status.Writer) (ctrl.Result, error) {
	return r.fly(ctx, st, ociClient, recordedLoadBalancer(st.Object()), r.leave)
}

// leave takes obj's backends out of the load balancer turn has the lane of, which
// its spec no longer names, as it takes out those of a backend set the
// spec no longer names (plan.Retire): drained for the drain period, then
// removed, each record going with its last backend. Once none is left its
// record refers to the spec's load balancer, which the next reconcile
// registers; until then the status says so and nothing is registered
// anywhere else.
func (r *Reconciler) leave(ctx context.Context, s *scope) (ctrl.Result, error) {
	obj, old, out, st := s.obj, s.lb, &s.out, s.st
	s.logger.Info("leaving the load balancer the spec no longer names: draining this resource's backends there, then removing them",
		"loadBalancer", old, "newLoadBalancer", obj.Spec.LoadBalancerID)
	jobs := decide.Removals(obj, old, plan.Retire, r.opts.decide().DrainFor(plan.LoadBalancerChanged), r.claimantsOf(ctx, obj), out)
	r.write(ctx, s, jobs)
	// The move is this spec's work: a GitOps tool that waits for the spec
	// to be seen reads the conditions below, a refusal among them.
	obj.Status.ObservedGeneration = obj.Generation
	switch {
	case out.Err != nil:
		status.SetConditions(obj, out)
		return ctrl.Result{}, errors.Join(fmt.Errorf("taking this resource's backends out of load balancer %s, which the spec no longer names: %w", old, out.Err), st.Flush(ctx))
	case len(obj.Status.BackendSets) > 0:
		out.Phase = &status.Failure{Reason: v1beta1.ReasonMoving,
			Message: fmt.Sprintf("draining this resource's backends in load balancer %s, which the spec no longer names, until %s; then they are removed and load balancer %s is registered",
				old, out.RevisitAt.UTC().Format(time.RFC3339), obj.Spec.LoadBalancerID)}
		status.SetConditions(obj, out)
		return r.requeue(out.RevisitAt), st.Flush(ctx)
	}
	obj.Status.LoadBalancerID = obj.Spec.LoadBalancerID
	return ctrl.Result{RequeueAfter: 100 * time.Millisecond}, st.Flush(ctx)
}
