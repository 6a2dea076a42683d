package readiness

import (
	"cmp"
	"sync"

	"github.com/peppy-ratio/lbregistrar/reconciler/oci"
	"github.com/peppy-ratio/lbregistrar/reconciler/plan"
)

// Store is what the last reconcile of each backend set saw of it: the
// backends it holds serving and, when read, their health. The gates are
// decided from it (Decide); it is in memory only, so a controller that
// restarts sees each set again on its first reconcile.
type Store struct {
	mu sync.Mutex
	m  map[[2]string]Seen // by load balancer and backend set
}

// Put records a backend set as backends (the set after its write, or as
// read when nothing was written) and health (nil: not read this time, when
// each backend served before keeps the state last read, and one new has
// none yet).
func (s *Store) Put(lb, set string, backends []plan.Backend, health *oci.BackendSetHealth) {
	key := [2]string{lb, set}
	s.mu.Lock()
	defer s.mu.Unlock()
	before := s.m[key].Health
	seen := Seen{Serving: make(map[string]bool, len(backends)), Health: make(map[string]string, len(backends))}
	var notOK map[string]string
	if health != nil {
		notOK = health.NotOK()
	}
	for _, b := range backends {
		if b.Drain || b.Offline {
			continue
		}
		k := b.Key()
		seen.Serving[k] = true
		switch {
		case health != nil:
			seen.Health[k] = cmp.Or(notOK[k], "OK")
		case before[k] != "":
			seen.Health[k] = before[k]
		}
	}
	if s.m == nil {
		s.m = map[[2]string]Seen{}
	}
	s.m[key] = seen
}

// Get is what was last seen of a backend set.
func (s *Store) Get(lb, set string) (Seen, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	seen, ok := s.m[[2]string{lb, set}]
	return seen, ok
}
