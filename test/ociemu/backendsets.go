package ociemu

import (
	"slices"

	"github.com/oracle/oci-go-sdk/v65/loadbalancer"
	"github.com/oracle/oci-go-sdk/v65/networkloadbalancer"
)

// family is what the Load Balancing and Network Load Balancer handlers
// differ in when they find and change backend sets: the kind of load
// balancer, the SDK types of its backend sets and backends, and what the
// etag of a backend set is. The steps every write takes (find the set,
// check If-Match, submit a change that bumps the etags) are written once,
// over a family.
type family[S, B any] struct {
	kind     string                               // names the load balancer in not-found errors
	sets     func(*balancer) (map[string]S, bool) // false for a load balancer of the other kind
	backends func(*S) *[]B
	name     func(B) string
	// etag is what reads of a backend set or its backends return and what
	// If-Match on their writes is checked against.
	etag func(b *balancer, set string) string
	// setRules are the rules on a backend set as a whole; perSet is the
	// most backends it may have, and perBalancer the most all of a load
	// balancer's may (rules.go).
	setRules    func(*balancer, *S) *apiError
	perSet      func(S) int
	perBalancer int
}

var classicFamily = family[loadbalancer.BackendSet, loadbalancer.Backend]{
	kind: "load balancer",
	sets: func(b *balancer) (map[string]loadbalancer.BackendSet, bool) {
		if b.classic == nil {
			return nil, false
		}
		return b.classic.BackendSets, true
	},
	backends: func(s *loadbalancer.BackendSet) *[]loadbalancer.Backend { return &s.Backends },
	name:     func(be loadbalancer.Backend) string { return *be.Name },
	// The Load Balancing API has one etag per load balancer: "the current
	// version of the load balancer and the resources it contains" (SDK,
	// GetBackendSetResponse.ETag), so any change to it, a backend set,
	// listener or certificate alike, makes every etag read before stale.
	etag:        func(b *balancer, _ string) string { return b.etag() },
	setRules:    func(_ *balancer, s *loadbalancer.BackendSet) *apiError { return classicSetRules(s) },
	perSet:      func(loadbalancer.BackendSet) int { return classicBackendsPerSet },
	perBalancer: classicBackendsPerBalancer,
}

var networkFamily = family[networkloadbalancer.BackendSet, networkloadbalancer.Backend]{
	kind: "network load balancer",
	sets: func(b *balancer) (map[string]networkloadbalancer.BackendSet, bool) {
		if b.network == nil {
			return nil, false
		}
		return b.network.BackendSets, true
	},
	backends: func(s *networkloadbalancer.BackendSet) *[]networkloadbalancer.Backend { return &s.Backends },
	name:     func(be networkloadbalancer.Backend) string { return *be.Name },
	// The NLB API documents its etags per resource ("the etag from a
	// previous GET or POST response for that resource").
	etag: func(b *balancer, set string) string { return b.setEtag(set) },
	setRules: func(b *balancer, s *networkloadbalancer.BackendSet) *apiError {
		return networkSetRules(s, deref(b.network.IsPreserveSourceDestination))
	},
	perSet: func(s networkloadbalancer.BackendSet) int {
		if deref(s.AreOperationallyActiveBackendsPreferred) {
			return nonPreemptiveBackends
		}
		return networkBackendsPerSet
	},
	perBalancer: networkBackendsPerBalancer,
}

// balancer finds a load balancer of this family; callers have e.mu locked.
func (f family[S, B]) balancer(e *Emulator, id string) (*balancer, *apiError) {
	b := e.balancers[id]
	if b == nil {
		return nil, notFound(f.kind + " " + id)
	}
	if _, ok := f.sets(b); !ok {
		return nil, notFound(f.kind + " " + id)
	}
	return b, nil
}

// backendSet finds a backend set; callers have e.mu locked.
func (f family[S, B]) backendSet(e *Emulator, id, name string) (*balancer, S, *apiError) {
	var zero S
	b, err := f.balancer(e, id)
	if err != nil {
		return nil, zero, err
	}
	sets, _ := f.sets(b)
	set, ok := sets[name]
	if !ok {
		return nil, zero, notFound("backend set " + name)
	}
	return b, set, nil
}

// requestedSet is a copy of the backend set a request's path names.
func (f family[S, B]) requestedSet(e *Emulator, rc *requestContext) (S, *apiError) {
	e.mu.Lock()
	defer e.mu.Unlock()
	_, set, err := f.backendSet(e, rc.loadBalancerID, rc.r.PathValue("backendSetName"))
	return set, err
}

// backendIndex is the index of the named backend in set, or -1.
func (f family[S, B]) backendIndex(set S, backend string) int {
	return slices.IndexFunc(*f.backends(&set), func(be B) bool { return f.name(be) == backend })
}

// submitChange checks the request's If-Match against the backend set's
// etag and submits a write that, when its work request succeeds, applies
// change to the stored set and bumps the etags. Callers have e.mu locked.
func (f family[S, B]) submitChange(e *Emulator, rc *requestContext, b *balancer, operation, name string, change func(*S)) (*response, error) {
	if err := checkIfMatch(rc, f.etag(b, name)); err != nil {
		return nil, err
	}
	return e.accept(rc, b, write{operation: operation, backendSet: name, apply: func() {
		sets, _ := f.sets(b)
		s := sets[name]
		change(&s)
		sets[name] = s
		b.changed(name)
	}})
}

// addBackend submits appending be to the named backend set, if the set
// with it is admitted.
func (f family[S, B]) addBackend(e *Emulator, rc *requestContext, b *balancer, name string, be B) (*response, error) {
	sets, _ := f.sets(b)
	with := sets[name]
	backends := f.backends(&with)
	*backends = append(slices.Clone(*backends), be)
	if err := f.admits(b, name, with, e.opts.BackendsPerBackendSet); err != nil {
		return nil, err
	}
	return f.submitChange(e, rc, b, "CreateBackend", name, func(s *S) {
		backends := f.backends(s)
		*backends = append(slices.Clone(*backends), be)
	})
}

// changeBackend serves a request naming one backend: it applies change to
// that backend when the work request succeeds; change returns false to
// delete it.
func (f family[S, B]) changeBackend(e *Emulator, rc *requestContext, operation string, change func(*B) bool) (*response, error) {
	name, backend := rc.r.PathValue("backendSetName"), rc.r.PathValue("backendName")
	e.mu.Lock()
	defer e.mu.Unlock()
	b, set, err := f.backendSet(e, rc.loadBalancerID, name)
	if err != nil {
		return nil, err
	}
	if f.backendIndex(set, backend) < 0 {
		return nil, notFound("backend " + backend)
	}
	return f.submitChange(e, rc, b, operation, name, func(s *S) {
		backends := f.backends(s)
		kept := []B{}
		for _, be := range *backends {
			if f.name(be) == backend && !change(&be) {
				continue
			}
			kept = append(kept, be)
		}
		*backends = kept
	})
}
