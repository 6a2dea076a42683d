package preview

import (
	"cmp"
	"slices"
	"sync"

	"github.com/peppy-ratio/lbregistrar/reconciler/metrics"
)

// Pending are the writes --dry-run did not make, as the last reconcile
// of each resource planned them for each load balancer, and the
// lbregistrar_pending_writes gauge they add up to.
type Pending struct {
	mu     sync.Mutex
	writes map[pendingKey][]BackendSetChange // only those that change
}

type pendingKey struct{ resource, loadBalancerID string }

// NewPending returns an empty Pending.
func NewPending() *Pending {
	return &Pending{writes: map[pendingKey][]BackendSetChange{}}
}

// Set replaces what resource's reconcile planned for lb; every backend set
// it planned counts, with 0 when nothing is pending there.
func (p *Pending) Set(resource, lb string, planned []BackendSetChange) {
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

// Forget drops what the named resource planned; it is gone, or deleting.
func (p *Pending) Forget(resource string) {
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
func (p *Pending) recount(changes []BackendSetChange) {
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

// Snapshot lists the pending writes by load balancer, backend set and resource.
func (p *Pending) Snapshot() []BackendSetChange {
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
