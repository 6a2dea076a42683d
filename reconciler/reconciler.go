// Package reconciler keeps the backend sets named by each LBRegistrar
// with exactly the backends the resource should own, and nothing else in
// the load balancer changes. This file is the flow of one reconcile; each
// step is a call into a package named by what it does (docs/reconciler.md
// has the map):
//
//  1. read the resource, and open its status (package status), which sets
//     aside an ownership record this controller did not sign;
//  2. credentials (package credentials): an identity that cannot sign in is a
//     condition, and nothing is written;
//  3. take the load balancer's lane (package lanes), or park until it is
//     free; the rest runs as a flight (fly, below), which has the lane but
//     no reconcile worker while it waits for OCI;
//  4. assess and decide (package decide), only then, so changes that
//     arrived while waiting are folded into this write;
//  5. write: per backend set, one If-Match write only when something
//     changed, waited for (package backendset, in write.go), and how each
//     write ended judged and carried out (verdict.go);
//  6. writeStatus: the ownership record, conditions and observedGeneration,
//     flushed once on the way out (package status).
//
// Deletion (finalize.go) drains the resource's own backends for the drain
// period, then removes them, unless they are to be kept (deletionPolicy
// Orphan, spec.suspend, the CRD itself being deleted). A suspended resource
// writes nothing to OCI. lbregistrar plan (Planner) and serve --dry-run
// decide with the same code and report each write instead of making it.
package reconciler

import (
	"context"
	"errors"
	"slices"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/index"
	"github.com/peppy-ratio/lbregistrar/reconciler/credentials"
	"github.com/peppy-ratio/lbregistrar/reconciler/decide"
	"github.com/peppy-ratio/lbregistrar/reconciler/lanes"
	"github.com/peppy-ratio/lbregistrar/reconciler/metrics"
	"github.com/peppy-ratio/lbregistrar/reconciler/status"
)

// Reconcile brings one LBRegistrar's backend sets in line, or cleans them up on deletion.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if r.flights.ParkBehind(req.Name, r.wakeFunc(req.Name)) {
		log.FromContext(ctx).V(1).Info("a write of this resource is under way; parked until it is done")
		return ctrl.Result{}, nil
	}
	obj, err := r.read(ctx, req)
	switch {
	case apierrors.IsNotFound(err):
		r.forget(req.Name)
		return ctrl.Result{}, nil
	case err != nil:
		return ctrl.Result{}, err
	case !obj.DeletionTimestamp.IsZero():
		return r.finalize(ctx, obj)
	}
	if err := r.holdFinalizer(ctx, obj); err != nil {
		return ctrl.Result{}, err
	}
	if obj.Spec.Suspend {
		return r.suspended(ctx, obj)
	}
	return r.register(ctx, obj)
}

// register takes obj's credentials and its load balancer's lane, and
// launches the flight that converges it.
func (r *Reconciler) register(ctx context.Context, obj *v1beta1.LBRegistrar) (ctrl.Result, error) {
	st, err := r.status.Open(ctx, obj)
	if err != nil {
		return ctrl.Result{}, err
	}
	before := slices.Clone(obj.Status.Conditions)
	claimants := r.claimantsOf(ctx, obj)
	ociClient, err := r.ociClientFor(ctx, obj)
	var ce *credentials.Error
	if errors.As(err, &ce) {
		return r.unusable(ctx, st, claimants, before, ce)
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	if moving(obj) {
		return r.move(ctx, ociClient, st)
	}
	obj.Status.LoadBalancerID = obj.Spec.LoadBalancerID
	return r.fly(ctx, st, ociClient, obj.Spec.LoadBalancerID, func(ctx context.Context, s *scope) (ctrl.Result, error) {
		return r.converge(ctx, s, claimants, before)
	})
}

// converge brings the resource's backend sets in line on its turn of the
// lane: it decides from the cluster as it is now, writes, and records the
// outcome.
func (r *Reconciler) converge(ctx context.Context, s *scope, claimants decide.Claimants, before []metav1.Condition) (ctrl.Result, error) {
	// Watched before the reads, so that another writer's change made after
	// them is noticed.
	r.watch.Keep(ctx, s.obj.Name, s.lb, s.oci)
	s.turn.Step(lanes.Reading, "", "")
	out, jobs, err := decide.Assess(ctx, r.client, s.oci, s.obj, claimants, r.opts.decide())
	if err != nil {
		return ctrl.Result{}, err
	}
	s.out = out
	metrics.Conflicts.Add(float64(len(out.Lost)))
	r.write(ctx, s, jobs)
	if err := r.writeStatus(ctx, s.st, &s.out, before); err != nil {
		return ctrl.Result{}, err
	}
	if s.out.Err != nil {
		return ctrl.Result{}, s.out.Err
	}
	return r.requeue(s.out.RevisitAt), nil
}

// scope is what one flight works with, gathered once when it takes off:
// the resource and its status writer, the OCI client its identity signs
// in with, its turn of the load balancer's lane, what it found so far, and
// whether it is a deletion. Every step of the flight reads these here
// rather than deriving them again.
type scope struct {
	st       *status.Writer
	obj      *v1beta1.LBRegistrar // st's object
	oci      ociAPI
	turn     *lanes.Turn
	lb       string // the load balancer whose lane turn has
	deleting bool   // obj is being deleted: its writes add nothing
	out      status.Outcome
	logger   logr.Logger
}

// fly runs steps as the flight of st's resource on a turn of load
// balancer lb's lane, which it has instead of a reconcile worker, or
// parks the resource until the lane is free, when it is enqueued again.
func (r *Reconciler) fly(ctx context.Context, st *status.Writer, ociClient ociAPI, lb string, steps func(context.Context, *scope) (ctrl.Result, error)) (ctrl.Result, error) {
	obj := st.Object()
	turn, ok := r.lanes.TryAcquire(lb, obj.Name, r.wakeFunc(obj.Name))
	if !ok {
		log.FromContext(ctx).V(1).Info("load balancer busy with another write; parked until it is done", "loadBalancer", lb)
		return ctrl.Result{}, nil
	}
	r.flights.Launch(ctx, obj.Name, turn, func(ctx context.Context) (ctrl.Result, error) {
		return steps(ctx, &scope{
			st: st, obj: obj, oci: ociClient, turn: turn, lb: lb,
			deleting: !obj.DeletionTimestamp.IsZero(),
			logger:   log.FromContext(ctx).WithValues("loadBalancer", lb),
		})
	})
	return ctrl.Result{}, nil
}

// claimantsOf reads the claimants of obj's backend sets through the claim
// index, with the ownership records this controller cannot vouch for
// dropped.
func (r *Reconciler) claimantsOf(ctx context.Context, obj *v1beta1.LBRegistrar) decide.Claimants {
	claimants := func(lb, name string) ([]v1beta1.LBRegistrar, error) {
		found, err := index.Claiming(ctx, r.client, lb, name)
		if err != nil {
			return nil, err
		}
		return slices.DeleteFunc(found, func(o v1beta1.LBRegistrar) bool { return o.Name == obj.Name }), nil
	}
	return func(lb, name string) ([]v1beta1.LBRegistrar, error) {
		key, err := r.keys.Key(ctx)
		if err != nil {
			return nil, err
		}
		return decide.Claimants(claimants).Vouched(key)(lb, name)
	}
}
