package readiness

import (
	"maps"
	"slices"
	"sync"
	"time"

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
	// Serving are the backends it has serving (neither drained nor
	// offline), and Health the state OCI last reported of each (OK,
	// WARNING, CRITICAL, UNKNOWN; none before its health was read since
	// it was added), read at ReadAt.
	Serving map[string]bool
	Health  map[string]string
	ReadAt  time.Time
	// Schedule is how OCI's health checker checks the set.
	Schedule oci.HealthSchedule
	// Stands are what the desired state made of the gated pods
	// (desired.Stand).
	Stands desired.Stands
	// Since is when each pod of Stands first stood here, and Reused
	// whether the set had a backend at its own address already then (a
	// pod at a gone pod's address): OCI's health of that backend is the
	// gone pod's until Schedule.Settle has passed since. A node target's
	// backend is never Reused: its health is what kube-proxy on the node
	// answers, which counts only ready endpoints (pkg/proxy/healthcheck),
	// so checks before the pod came find what checks after it would until
	// its gate lets it be Ready.
	Since  map[types.UID]time.Time
	Reused map[types.UID]bool
	// Blocked says why a wanted backend it does not have is not written
	// (the set held, claimed by another resource, OCI refusing the write
	// or withholding at its limit); "" when nothing stands in the way.
	Blocked string
	present map[string]bool // every backend it has, drained ones too
}

// NewSet is a backend set with the backends it has (after its write, or as
// read when nothing was written; nil when it was not read), with health as
// read at readAt (nil: not read this time), OCI's health check schedule,
// stands and why wanted backends are not written.
func NewSet(backends []plan.Backend, health *oci.BackendSetHealth, readAt time.Time, schedule oci.HealthSchedule, stands desired.Stands, blocked string) *Set {
	s := &Set{Serving: make(map[string]bool, len(backends)), Stands: stands, Blocked: blocked, Schedule: schedule, present: make(map[string]bool, len(backends))}
	if health != nil {
		s.Health, s.ReadAt = make(map[string]string, len(backends)), readAt
	}
	var notOK map[string]string
	unlisted := ""
	if health != nil {
		notOK, unlisted = health.NotOK(), health.Unlisted()
	}
	for _, b := range backends {
		k := b.Key()
		s.present[k] = true
		if b.Drain || b.Offline {
			continue
		}
		s.Serving[k] = true
		if health != nil {
			if state, listed := notOK[k]; listed {
				s.Health[k] = state
			} else {
				s.Health[k] = unlisted
			}
		}
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

// Put records what a reconcile of resource found, at now. A set whose
// health was not read this time keeps the state last read of each backend
// still serving, and when it was read. A pod that stands in a set for the
// first time is stamped now, and marked Reused when the set had a
// backend at its own address before (or nothing is known of the set
// before: a restarted controller assumes the worse).
func (s *Store) Put(resource string, r Record, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	before := s.m[resource]
	for name, set := range r.Sets {
		var was *Set
		if before != nil {
			was = before.Sets[name]
		}
		if set.Health == nil {
			set.Health = map[string]string{}
			if was != nil {
				set.ReadAt = was.ReadAt
				for k := range set.Serving {
					if state := was.Health[k]; state != "" {
						set.Health[k] = state
					}
				}
			}
		}
		set.Since, set.Reused = make(map[types.UID]time.Time, len(set.Stands)), make(map[types.UID]bool, len(set.Stands))
		for uid, stands := range set.Stands {
			if since, ok := was.since(uid); ok {
				set.Since[uid], set.Reused[uid] = since, was.Reused[uid]
				continue
			}
			set.Since[uid] = now
			set.Reused[uid] = slices.ContainsFunc(stands, func(st desired.Stand) bool {
				return !st.Node && (was == nil || slices.ContainsFunc(st.Backends, func(b string) bool { return was.present[b] }))
			})
		}
	}
	if s.m == nil {
		s.m = map[string]*Record{}
	}
	s.m[resource] = &r
}

// since is when pod uid first stood in s, if it stands there.
func (s *Set) since(uid types.UID) (time.Time, bool) {
	if s == nil {
		return time.Time{}, false
	}
	t, ok := s.Since[uid]
	return t, ok
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
