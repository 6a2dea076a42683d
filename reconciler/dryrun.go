package reconciler

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/reconciler/backendset"
	"github.com/peppy-ratio/lbregistrar/reconciler/metrics"
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
	r.pending.set(obj.Name, lb, changes)
}

// pendingWrites are the writes --dry-run held back, as the last reconcile
// of each resource planned them for each load balancer, and the
// lbregistrar_pending_writes gauge they add up to.
type pendingWrites struct {
	mu     sync.Mutex
	writes map[pendingKey][]BackendSetChange // only those that change
}

type pendingKey struct{ resource, loadBalancerID string }

func newPendingWrites() *pendingWrites {
	return &pendingWrites{writes: map[pendingKey][]BackendSetChange{}}
}

// set replaces what resource's reconcile planned for lb; every backend set
// it planned counts, with 0 when nothing is pending there.
func (p *pendingWrites) set(resource, lb string, planned []BackendSetChange) {
	p.mu.Lock()
	defer p.mu.Unlock()
	key := pendingKey{resource, lb}
	counted := p.writes[key]
	var changing []BackendSetChange
	for _, c := range planned {
		if c.Changed() {
			changing = append(changing, c)
		}
	}
	if len(changing) == 0 {
		delete(p.writes, key)
	} else {
		p.writes[key] = changing
	}
	p.recount(append(counted, planned...))
}

// forget drops what the named resource planned; it is gone, or deleting.
func (p *pendingWrites) forget(resource string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var counted []BackendSetChange
	for key, writes := range p.writes {
		if key.resource == resource {
			counted = append(counted, writes...)
			delete(p.writes, key)
		}
	}
	p.recount(counted)
}

// recount sets the gauge of the backend sets of changes from what is pending.
func (p *pendingWrites) recount(changes []BackendSetChange) {
	for _, c := range changes {
		n := 0
		for key, writes := range p.writes {
			for _, w := range writes {
				if key.loadBalancerID == c.LoadBalancerID && w.BackendSet == c.BackendSet {
					n++
				}
			}
		}
		metrics.PendingWrites.WithLabelValues(c.LoadBalancerID, c.BackendSet).Set(float64(n))
	}
}

// snapshot lists the pending writes by load balancer, backend set and resource.
func (p *pendingWrites) snapshot() []BackendSetChange {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []BackendSetChange
	for _, writes := range p.writes {
		out = append(out, writes...)
	}
	slices.SortFunc(out, func(a, b BackendSetChange) int {
		return cmp.Or(cmp.Compare(a.LoadBalancerID, b.LoadBalancerID), cmp.Compare(a.BackendSet, b.BackendSet), cmp.Compare(a.LBRegistrar, b.LBRegistrar))
	})
	return out
}
