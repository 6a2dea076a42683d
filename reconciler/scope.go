package reconciler

import (
	"context"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/reconciler/lanes"
	"github.com/peppy-ratio/lbregistrar/reconciler/status"
)

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
	lb       string // the load balancer whose lane turn holds
	deleting bool   // obj is being deleted: its writes add nothing
	out      status.Outcome
	logger   logr.Logger
}

// fly runs steps as the flight of st's resource on a turn of load
// balancer lb's lane, which it holds instead of a reconcile worker, or
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
