package reconciler

import (
	"context"
	"slices"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/claims"
	"github.com/peppy-ratio/lbregistrar/reconciler/decide"
)

// claimantsOf reads the claimants of obj's backend sets through the claim
// index, with the ownership records this controller cannot vouch for
// dropped.
func (r *Reconciler) claimantsOf(ctx context.Context, obj *v1beta1.LBRegistrar) decide.Claimants {
	claimants := func(lb, name string) ([]v1beta1.LBRegistrar, error) {
		found, err := claims.Of(ctx, r.client, lb, name)
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
