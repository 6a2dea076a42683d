package readiness

import (
	"maps"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"github.com/peppy-ratio/lbregistrar/reconciler/desired"
	"github.com/peppy-ratio/lbregistrar/reconciler/oci"
	"github.com/peppy-ratio/lbregistrar/reconciler/plan"
)

// Record is what the last reconcile of one LBRegistrar found, for the
// gates of the pods it registers.
type Record struct {
	// Generation is that of the spec the reconcile decided from; a gate
	// that sees a newer one waits for the next.
	Generation int64
	// Blocked says why nothing of the resource is written (its identity
	// cannot be used); "" when it writes.
	Blocked string
	// Sets are its backend sets, by name.
	Sets map[string]*Set
}

// Set is what the reconcile saw of one backend set.
type Set struct {
	// Serving are the backends it holds serving (neither drained nor
	// offline), and Health the state OCI last reported of each (OK,
	// WARNING, CRITICAL, UNKNOWN; none before its health was read since
	// the pods standing for it now were).
	Serving map[string]bool
	Health  map[string]string
	// Stands are what the desired state made of the gated pods
	// (desired.Stand).
	Stands desired.Stands
	// Blocked says why a wanted backend it does not hold is not written
	// (the set held, claimed by another resource, OCI refusing the write
	// or withholding at its limit); "" when nothing stands in the way.
	Blocked string
}

// NewSet is a backend set as it holds backends (after its write, or as
// read when nothing was written; nil when it was not read), with health as
// read (nil: not read this time), stands and why wanted backends are not
// written.
func NewSet(backends []plan.Backend, health *oci.BackendSetHealth, stands desired.Stands, blocked string) *Set {
	s := &Set{Serving: make(map[string]bool, len(backends)), Health: make(map[string]string, len(backends)), Stands: stands, Blocked: blocked}
	var notOK map[string]string
	unlisted := ""
	if health != nil {
		notOK, unlisted = health.NotOK(), health.Unlisted()
	}
	for _, b := range backends {
		if b.Drain || b.Offline {
			continue
		}
		k := b.Key()
		s.Serving[k] = true
		if health != nil {
			if state, listed := notOK[k]; listed {
				s.Health[k] = state
			} else {
				s.Health[k] = unlisted
			}
		}
	}
	if health == nil {
		s.Health = nil // not read: Put carries the last states over
	}
	return s
}

// Store is the Record of each LBRegistrar. The gates are decided from it
// (Decide); it is in memory only, so a controller that restarts sees each
// resource again on its first reconcile.
type Store struct {
	mu sync.Mutex
	m  map[string]*Record
}

// Put records what a reconcile of resource found. A set whose health was
// not read this time keeps the state last read of each backend still
// serving, unless a pod stands for it now that did not when it was read
// (a new pod at an old pod's address waits for a read of its own).
func (s *Store) Put(resource string, r Record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	before := s.m[resource]
	for name, set := range r.Sets {
		if set.Health != nil {
			continue
		}
		set.Health = map[string]string{}
		if before == nil || before.Sets[name] == nil {
			continue
		}
		was := before.Sets[name]
		standing, stood := standingFor(set.Stands), standingFor(was.Stands)
		for k := range set.Serving {
			if state := was.Health[k]; state != "" && newcomers(standing[k], stood[k]) == 0 {
				set.Health[k] = state
			}
		}
	}
	if s.m == nil {
		s.m = map[string]*Record{}
	}
	s.m[resource] = &r
}

// standingFor is, by backend, the pods standing for it.
func standingFor(stands desired.Stands) map[string]map[types.UID]bool {
	out := map[string]map[types.UID]bool{}
	for uid, list := range stands {
		for _, st := range list {
			for _, b := range st.Backends {
				if out[b] == nil {
					out[b] = map[types.UID]bool{}
				}
				out[b][uid] = true
			}
		}
	}
	return out
}

// newcomers counts the pods in now that are not in before.
func newcomers(now, before map[types.UID]bool) int {
	n := 0
	for uid := range now {
		if !before[uid] {
			n++
		}
	}
	return n
}

// Get is the last Record of resource.
func (s *Store) Get(resource string) (Record, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.m[resource]
	if !ok {
		return Record{}, false
	}
	return Record{Generation: r.Generation, Blocked: r.Blocked, Sets: maps.Clone(r.Sets)}, true
}

// Forget drops the record of a resource that is gone.
func (s *Store) Forget(resource string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, resource)
}
