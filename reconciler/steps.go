package reconciler

import (
	"context"
	"math/rand/v2"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/reconciler/credentials"
	"github.com/peppy-ratio/lbregistrar/reconciler/decide"
	"github.com/peppy-ratio/lbregistrar/reconciler/metrics"
	"github.com/peppy-ratio/lbregistrar/reconciler/status"
)

// read reads the resource from the cache, or past it while the cache is
// behind this process's own last status write.
func (r *Reconciler) read(ctx context.Context, req ctrl.Request) (*v1beta1.LBRegistrar, error) {
	var obj v1beta1.LBRegistrar
	err := r.client.Get(ctx, req.NamespacedName, &obj)
	if err == nil && r.status.Behind(&obj) {
		err = r.apiReader.Get(ctx, req.NamespacedName, &obj)
	}
	return &obj, err
}

// forgetter is a store of what the process keeps per resource.
type forgetter interface{ Forget(resource string) }

// stores lists every store of what the process keeps per resource, so
// that one that is gone is forgotten by all of them
// (TestEveryStoreForgetsAGoneResource keeps the list whole).
func (r *Reconciler) stores() []forgetter {
	return []forgetter{r.secrets, r.pending, &r.refusals, &r.waiters, &r.drains, r.status, r.watch, r.flights, &r.seen, metrics.PerResource}
}

// forget drops what the process keeps of a resource that is gone.
func (r *Reconciler) forget(name string) {
	for _, s := range r.stores() {
		s.Forget(name)
	}
}

// holdFinalizer adds the finalizer that keeps obj until its backends are
// deregistered. A dry run adds none: it could not keep that promise.
func (r *Reconciler) holdFinalizer(ctx context.Context, obj *v1beta1.LBRegistrar) error {
	if controllerutil.ContainsFinalizer(obj, Finalizer) || r.opts.DryRun {
		return nil
	}
	base := obj.DeepCopy()
	controllerutil.AddFinalizer(obj, Finalizer)
	return r.client.Patch(ctx, obj, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
}

// ociClientFor returns the OCI client for obj's credentials.
func (r *Reconciler) ociClientFor(ctx context.Context, obj *v1beta1.LBRegistrar) (ociAPI, error) {
	return credentials.ClientFor(ctx, r.secrets, r.builders, obj)
}

// unusable records that obj's credentials cannot be used; nothing is
// written until they change, and the Secret watch brings the resource back
// then, or, for a problem no watch sees, the retry soon after.
func (r *Reconciler) unusable(ctx context.Context, st *status.Writer, claimants decide.Claimants, before []metav1.Condition, ce *credentials.Error) (ctrl.Result, error) {
	obj := st.Object()
	lost, err := decide.Lost(obj, claimants)
	if err != nil {
		return ctrl.Result{}, err
	}
	out := status.Outcome{Lost: lost, Unusable: &status.Failure{Reason: ce.Reason, Message: ce.Message}}
	r.watch.Forget(obj.Name)
	r.gatesBlocked(obj, ce.Reason+": "+ce.Message)
	log.FromContext(ctx).Error(ce, "the credentials cannot be used; nothing is written until they change",
		"loadBalancer", obj.Spec.LoadBalancerID, "reason", ce.Reason, "cause", ce.Cause)
	r.events.Eventf(obj, nil, corev1.EventTypeWarning, ce.Reason, "ReadCredentials", "%s", ce.Message)
	var retryAt time.Time
	if ce.Retry {
		retryAt = time.Now().Add(credentialRetry)
	}
	return r.requeue(retryAt), r.writeStatus(ctx, st, &out, before)
}

// credentialRetry is how soon credentials that failed for a reason no
// watch sees are tried again.
const credentialRetry = 10 * time.Second

// writeStatus writes what the reconcile found into obj's status, on its way out.
func (r *Reconciler) writeStatus(ctx context.Context, st *status.Writer, out *status.Outcome, before []metav1.Condition) error {
	obj := st.Object()
	obj.Status.ObservedGeneration = obj.Generation
	obj.Status.Targets = int32(len(obj.Spec.Services))
	status.SetConditions(obj, out)
	status.LogDecisions(log.FromContext(ctx).WithValues("loadBalancer", obj.Spec.LoadBalancerID), before, obj, out)
	return st.Flush(ctx)
}

// requeue schedules the periodic drift repair, jittered so resources spread
// out, or the revisit at revisitAt when that comes first.
func (r *Reconciler) requeue(revisitAt time.Time) ctrl.Result {
	var res ctrl.Result
	if r.opts.Resync > 0 {
		res.RequeueAfter = r.opts.Resync + time.Duration(rand.Int64N(int64(r.opts.Resync)/10+1))
	}
	if !revisitAt.IsZero() {
		if until := max(time.Until(revisitAt), 0) + 100*time.Millisecond; res.RequeueAfter == 0 || until < res.RequeueAfter {
			res.RequeueAfter = until
		}
	}
	return res
}

// wakeFunc enqueues the named resource again; it never blocks the caller.
func (r *Reconciler) wakeFunc(name string) func() {
	return func() { r.wakeups.Wake(name) }
}

// suspended records that obj, whose spec.suspend is true, writes nothing to
// OCI: its backends and its ownership record stay as they are, and the
// load balancer is no longer watched for it.
func (r *Reconciler) suspended(ctx context.Context, obj *v1beta1.LBRegistrar) (ctrl.Result, error) {
	r.watch.Forget(obj.Name)
	st, err := r.status.Open(ctx, obj)
	if err != nil {
		return ctrl.Result{}, err
	}
	status.SetSuspended(obj)
	obj.Status.ObservedGeneration = obj.Generation
	return ctrl.Result{}, st.Flush(ctx)
}
