// Package reconciler keeps the backend sets named by each LBRegistrar
// holding exactly the backends the resource should own, and nothing else in
// the load balancer changes.
//
// One reconcile of a resource:
//  1. credentials from the API key's Secrets (a bad key is a condition);
//  2. the load balancer's lane is taken (or the resource parks until it is
//     free), so writes to one load balancer are serialized across resources;
//     the rest goes on as a flight (package lanes), which holds the lane but no
//     reconcile worker while it waits for OCI;
//  3. decide, only then, so changes that arrived while waiting are folded
//     into this write: a backend set another live resource keeps
//     (validation.Precedes) is left alone and the Conflict condition says
//     who holds it; the desired state says what the others should hold;
//  4. per backend set: read, plan over the ownership record, and only when
//     something changed one UpdateBackendSet with If-Match, waited for;
//     backend sets dropped from the spec have their owned backends removed;
//  5. status: the ownership record, conditions, observedGeneration.
//
// lbregistrar plan decides and plans with the same code (Planner), and so
// does serve --dry-run, which reports each write instead of making it.
//
// Deleting a resource drains its own backends for the drain period, then
// removes them; a missing load balancer or backend set counts as clean, and
// after the cleanup timeout the finalizer goes regardless, so deletion never
// hangs forever.
//
// Its log lines name the load balancer and, where there is one, the backend
// set; the busy lanes, with their holders, steps and parked resources, are
// served at DebugLanesPath (see docs/operations.md).
package reconciler

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/reconciler/credentials"
	"github.com/peppy-ratio/lbregistrar/reconciler/decide"
	"github.com/peppy-ratio/lbregistrar/reconciler/desired"
	"github.com/peppy-ratio/lbregistrar/reconciler/lanes"
	"github.com/peppy-ratio/lbregistrar/reconciler/lbwatch"
	"github.com/peppy-ratio/lbregistrar/reconciler/metrics"
	"github.com/peppy-ratio/lbregistrar/reconciler/oci"
	"github.com/peppy-ratio/lbregistrar/reconciler/ownership"
	"github.com/peppy-ratio/lbregistrar/reconciler/preview"
	"github.com/peppy-ratio/lbregistrar/reconciler/status"
)

// Finalizer holds a resource until its own backends are deregistered.
const Finalizer = "nodes.peppy-ratio.dev/deregister"

// Reconciler reconciles LBRegistrar (v1beta1, the hub).
type Reconciler struct {
	client     client.Client
	apiReader  client.Reader // uncached reads
	secrets    *credentials.Secrets
	events     events.EventRecorder
	clientFor  func(oci.Credentials) (ociAPI, error)
	lanes      *lanes.Lanes
	wakeups    *lanes.Wakeups
	watch      *lbwatch.Watch // notices other writers' changes
	flights    *lanes.Flights
	pending    *preview.Pending // held back by DryRun
	rejections rejections
	drains     drains
	status     *status.Recorder
	records    *ownership.KeyStore
	elected    <-chan struct{} // closed once this replica leads
	opts       Options
}

// wakeFunc enqueues the named resource again; it never blocks the caller.
func (r *Reconciler) wakeFunc(name string) func() {
	return func() { r.wakeups.Wake(name) }
}

// Reconcile brings one LBRegistrar's backend sets in line, or cleans them up on deletion.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if r.flights.ParkBehind(req.Name, r.wakeFunc(req.Name)) {
		log.FromContext(ctx).V(1).Info("a write of this resource is under way; parked until it is done")
		return ctrl.Result{}, nil
	}
	var obj v1beta1.LBRegistrar
	err := r.client.Get(ctx, req.NamespacedName, &obj)
	if err == nil && r.status.Behind(&obj) {
		err = r.apiReader.Get(ctx, req.NamespacedName, &obj)
	}
	if err != nil {
		if apierrors.IsNotFound(err) {
			r.secrets.Forget(req.Name)
			r.pending.Forget(req.Name)
			r.rejections.forget(req.Name)
			r.drains.forget(req.Name)
			r.status.Forget(req.Name)
			r.watch.Forget(req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !obj.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, &obj)
	}
	// A dry run adds no finalizer: it could not keep the promise to deregister.
	if !controllerutil.ContainsFinalizer(&obj, Finalizer) && !r.opts.DryRun {
		base := obj.DeepCopy()
		controllerutil.AddFinalizer(&obj, Finalizer)
		if err := r.client.Patch(ctx, &obj, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
			return ctrl.Result{}, err
		}
	}
	return r.register(ctx, &obj)
}

// outcome gathers what one reconcile found, for the conditions.
type outcome struct {
	issues   []desired.Issue
	held     []string
	pending  []string          // writes DryRun held back
	lost     map[string]string // backend set -> resource that keeps it
	failures []string
	// unhealthy says, per backend set, which own backends OCI reports
	// unhealthy; it makes Degraded True but fails nothing.
	unhealthy []string
	// revisitAt is when the resource must be reconciled again before its
	// resync: the first drain of a departed node is over, or additions OCI
	// refused are due to be tried again.
	revisitAt time.Time
	err       error
}

func (r *Reconciler) register(ctx context.Context, obj *v1beta1.LBRegistrar) (ctrl.Result, error) {
	logger := log.FromContext(ctx).WithValues("loadBalancer", obj.Spec.LoadBalancerID)
	st, err := r.status.Open(ctx, obj)
	if err != nil {
		return ctrl.Result{}, err
	}
	before := slices.Clone(obj.Status.Conditions)
	var out status.Outcome

	claimants := r.claimantsOf(ctx, obj)
	ociClient, err := r.ociClientFor(ctx, obj)
	if err != nil {
		var ce *credentials.Error
		if !errors.As(err, &ce) {
			return ctrl.Result{}, err
		}
		if out.Lost, err = decide.Lost(obj, claimants); err != nil {
			return ctrl.Result{}, err
		}
		obj.Status.ObservedGeneration = obj.Generation
		obj.Status.Targets = int32(len(obj.Spec.Services))
		out.Unusable = &status.Unusable{Reason: ce.Reason, Message: ce.Message}
		status.SetConditions(obj, &out)
		status.LogDecisions(logger, before, obj, &out)
		r.watch.Forget(obj.Name)
		logger.Error(ce, "the API key cannot be used; nothing is written until its Secret changes", "reason", ce.Reason, "cause", ce.Cause)
		r.events.Eventf(obj, nil, corev1.EventTypeWarning, ce.Reason, "ReadCredentials", "%s", ce.Message)
		// The Secret watch brings the resource back once the Secret is fixed.
		return r.resync(), st.Flush(ctx)
	}

	if err := r.leaveOldLoadBalancer(ctx, ociClient, st, &out); err != nil {
		status.SetConditions(obj, &out)
		return ctrl.Result{}, errors.Join(err, st.Flush(ctx))
	}
	obj.Status.LoadBalancerID = obj.Spec.LoadBalancerID

	turn, ok := r.lanes.TryAcquire(obj.Spec.LoadBalancerID, obj.Name, r.wakeFunc(obj.Name))
	if !ok {
		logger.V(1).Info("load balancer busy with another write; parked until it is done")
		return ctrl.Result{}, nil // enqueued again when the lane is free
	}
	// From here on the lane is held, and the reconcile goes on as a flight,
	// without this worker.
	r.flights.Launch(ctx, obj.Name, turn, func(ctx context.Context) (ctrl.Result, error) {
		return r.converge(ctx, ociClient, st, turn, claimants, before)
	})
	return ctrl.Result{}, nil
}

// converge brings obj's backend sets in line on its turn of the lane: it
// decides from the cluster as it is now, so changes that arrived while the
// resource waited for the lane go into this write, then syncs and records
// the status.
func (r *Reconciler) converge(ctx context.Context, ociClient ociAPI, st *status.Writer, turn *lanes.Turn, claimants decide.Claimants, before []metav1.Condition) (ctrl.Result, error) {
	obj := st.Object()
	logger := log.FromContext(ctx).WithValues("loadBalancer", obj.Spec.LoadBalancerID)
	// Watched before the reads, so that another writer's change made after
	// them is noticed.
	r.watch.Keep(ctx, obj.Name, obj.Spec.LoadBalancerID, ociClient)
	// The backend sets are read first: what of a node goes into one (which
	// address, its instance) depends on the backend set.
	turn.Step(lanes.Reading, "", "")
	out, jobs, err := decide.Assess(ctx, r.client, ociClient, obj, claimants, r.opts.decide())
	if err != nil {
		return ctrl.Result{}, err
	}
	if len(out.Lost) > 0 {
		metrics.Conflicts.Add(float64(len(out.Lost)))
	}

	r.syncAll(ctx, ociClient, st, &out, turn, jobs)

	obj.Status.ObservedGeneration = obj.Generation
	obj.Status.Targets = int32(len(obj.Spec.Services))
	status.SetConditions(obj, &out)
	status.LogDecisions(logger, before, obj, &out)
	if err := st.Flush(ctx); err != nil {
		return ctrl.Result{}, err
	}
	if out.Err != nil {
		return ctrl.Result{}, out.Err
	}
	res := r.resync()
	if !out.RevisitAt.IsZero() {
		if until := max(time.Until(out.RevisitAt), 0) + 100*time.Millisecond; res.RequeueAfter == 0 || until < res.RequeueAfter {
			res.RequeueAfter = until
		}
	}
	return res, nil
}

// resync schedules the periodic drift repair, jittered so resources spread out.
func (r *Reconciler) resync() ctrl.Result {
	if r.opts.Resync <= 0 {
		return ctrl.Result{}
	}
	return ctrl.Result{RequeueAfter: r.opts.Resync + time.Duration(rand.Int64N(int64(r.opts.Resync)/10+1))}
}

// ociClientFor returns the OCI client for obj's credentials.
func (r *Reconciler) ociClientFor(ctx context.Context, obj *v1beta1.LBRegistrar) (ociAPI, error) {
	creds, err := r.secrets.Credentials(ctx, obj.Name, &obj.Spec.APIKey)
	if err != nil {
		return nil, err
	}
	return credentials.Client(r.clientFor, creds)
}
