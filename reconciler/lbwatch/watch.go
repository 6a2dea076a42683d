// Package lbwatch notices, within a period rather than at the resync,
// changes other writers make to the load balancers the controller keeps:
// another cluster draining or removing a node address both register,
// Terraform, the console. OCI offers no watch, but every change to a load
// balancer is a work request, and its work requests can be listed. A work
// request that ended since the last look and that this process did not
// make wakes every resource kept on that load balancer; its
// reconcile reads the backend sets and puts back what it wants, saying
// Ready=False while it writes.
//
// The package owns the listing and its pacing: one listing per load
// balancer per period, within a share of the OCI rate limit of its own, so
// that watching many load balancers stretches the period instead of
// starving writes. It reads only; it reaches the controller through the
// wake function alone.
package lbwatch

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/peppy-ratio/lbregistrar/reconciler/oci"
)

// Lister lists a load balancer's work requests, from a listing started at
// since or later (oci.Client.WorkRequestsSince); a resource's OCI client,
// with that resource's credentials.
type Lister interface {
	WorkRequestsSince(ctx context.Context, loadBalancerID string, since time.Time) ([]oci.WorkRequest, error)
}

// Watch lists the work requests of each load balancer a resource keeps,
// once per period, and wakes the resources when another writer changed it.
type Watch struct {
	period time.Duration
	pace   *rate.Limiter
	wake   func(resource string)

	mu        sync.Mutex
	resources map[string]string        // resource -> the load balancer it keeps
	balancers map[string]*balancerView // load balancer -> what is known of it
}

// balancerView is what the watch knows of one load balancer.
type balancerView struct {
	// keepers are the resources keeping it, each with its lister.
	keepers map[string]Lister
	// ended are the ended work requests of the last listing; nil until the
	// first, which only sets what later ones are compared with.
	ended map[string]bool
	// own are the work requests this process made, and when it said so.
	own map[string]time.Time
}

// New returns a watch that lists each kept load balancer's work requests
// every period, at most callsPerSecond listings per second in all, and calls wake for
// each resource kept on a load balancer another writer changed. A period of
// 0 watches nothing.
func New(period time.Duration, callsPerSecond rate.Limit, wake func(resource string)) *Watch {
	return &Watch{
		period:    period,
		pace:      rate.NewLimiter(callsPerSecond, 1),
		wake:      wake,
		resources: map[string]string{},
		balancers: map[string]*balancerView{},
	}
}

// Keep watches the load balancer the resource keeps, listing with lister,
// in place of whatever it kept before. The first time a load balancer is
// kept, its work requests are listed at once, so that the caller, reading
// the backend sets after it, misses no change made after its reads.
func (w *Watch) Keep(ctx context.Context, resource, loadBalancerID string, lister Lister) {
	w.mu.Lock()
	if prev, ok := w.resources[resource]; ok && prev != loadBalancerID {
		w.release(resource, prev)
	}
	w.resources[resource] = loadBalancerID
	b := w.balancers[loadBalancerID]
	if b == nil {
		b = &balancerView{keepers: map[string]Lister{}, own: map[string]time.Time{}}
		w.balancers[loadBalancerID] = b
	}
	b.keepers[resource] = lister
	unseen := b.ended == nil
	w.mu.Unlock()
	if unseen && w.period > 0 {
		w.look(ctx, loadBalancerID, time.Now())
	}
}

// Forget stops watching for the resource.
func (w *Watch) Forget(resource string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if lb, ok := w.resources[resource]; ok {
		w.release(resource, lb)
		delete(w.resources, resource)
	}
}

// release drops resource from lb's keepers, and lb once nobody keeps it.
func (w *Watch) release(resource, lb string) {
	if b := w.balancers[lb]; b != nil {
		if delete(b.keepers, resource); len(b.keepers) == 0 {
			delete(w.balancers, lb)
		}
	}
}

// keepers are the resources keeping lb, by name, with their listers.
func (w *Watch) keepers(lb string) ([]string, []Lister) {
	b := w.balancers[lb]
	if b == nil {
		return nil, nil
	}
	names := slices.Sorted(maps.Keys(b.keepers))
	listers := make([]Lister, len(names))
	for i, name := range names {
		listers[i] = b.keepers[name]
	}
	return names, listers
}

// Own says this process made the work request: its end is no other
// writer's change.
func (w *Watch) Own(loadBalancerID, workRequestID string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if b := w.balancers[loadBalancerID]; b != nil {
		b.own[workRequestID] = time.Now()
	}
}

// Start lists every period until ctx ends. It runs only on the elected
// leader, as the controller it wakes does.
func (w *Watch) Start(ctx context.Context) error {
	if w.period <= 0 {
		return nil
	}
	t := time.NewTicker(w.period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		w.Round(ctx)
	}
}

// Round lists the work requests of every kept load balancer once and wakes
// the resources of those another writer changed since the last round.
func (w *Watch) Round(ctx context.Context) {
	w.mu.Lock()
	lbs := slices.Sorted(maps.Keys(w.balancers))
	w.mu.Unlock()
	// A listing made in this round serves the round (NLBs of a compartment).
	start := time.Now()
	for _, lb := range lbs {
		if err := w.pace.Wait(ctx); err != nil {
			return
		}
		w.look(oci.Yielding(ctx), lb, start) // unlike Keep's, no reconcile waits on it
	}
}

// look lists one load balancer's work requests, from a listing started at
// since or later, with the credentials of the first resource keeping it
// that may, and wakes its resources on a change.
func (w *Watch) look(ctx context.Context, lb string, since time.Time) {
	w.mu.Lock()
	_, listers := w.keepers(lb)
	w.mu.Unlock()
	var wrs []oci.WorkRequest
	var err error
	for _, l := range listers {
		if wrs, err = l.WorkRequestsSince(ctx, lb, since); err == nil {
			break
		}
	}
	if err != nil {
		log.FromContext(ctx).V(1).Info("listing the load balancer's work requests failed; changes by other writers are noticed at the resync until it works again",
			"loadBalancer", lb, "error", err.Error())
		return
	}
	w.mu.Lock()
	changed := w.compare(lb, since, wrs)
	var wake []string
	if changed {
		wake, _ = w.keepers(lb)
	}
	w.mu.Unlock()
	if changed {
		log.FromContext(ctx).Info("another writer changed the load balancer; reconciling the resources keeping it", "loadBalancer", lb, "resources", wake)
	}
	for _, name := range wake {
		w.wake(name)
	}
}

// compare folds a listing started at start into what is known of lb and
// reports whether a work request of another writer ended since the last.
func (w *Watch) compare(lb string, start time.Time, wrs []oci.WorkRequest) bool {
	b := w.balancers[lb]
	if b == nil {
		return false // forgotten while listing
	}
	first := b.ended == nil
	listed := make(map[string]bool, len(wrs))
	ended := map[string]bool{}
	changed := false
	for _, wr := range wrs {
		listed[wr.ID] = true
		if !wr.Ended {
			continue
		}
		ended[wr.ID] = true
		if _, own := b.own[wr.ID]; !first && !own && !b.ended[wr.ID] {
			changed = true
		}
	}
	b.ended = ended
	for id, at := range b.own {
		if !listed[id] && at.Before(start) {
			delete(b.own, id) // a listing made after it no longer shows it
		}
	}
	return changed
}
