package backendset

import (
	"slices"
	"sync"
	"time"
)

// Refusals remembers the backend set writes OCI refused for what they
// contain (oci.IsRefused: bad input, a limit), per resource: the additions
// such a write carried are not sent again, unchanged, until their retry is
// due, which backs off with each refusal (Backoff.Max, doubling, at most
// the resync period). Meanwhile the backend set is written without them,
// so removals, weight changes and drains never wait for additions that do
// not fit, and Ready keeps OCI's reason. New spec, or other additions (the
// wanted nodes changed), are tried at once. It is kept in memory only;
// after a restart the write is tried once more. The zero value is ready
// to use.
type Refusals struct {
	mu sync.Mutex
	by map[refusalKey]*Refusal
}

type refusalKey struct{ resource, backendSet string }

// Refusal is a refused write: at which generation, of which additions,
// why (Err), how often in a row, and when its additions are tried again
// (RetryAt).
type Refusal struct {
	generation int64
	adds       []string
	Err        error
	refusals   int
	RetryAt    time.Time
}

// InForce returns the refusal of the backend set's additions at this
// generation whose retry is not due at now, or nil.
func (r *Refusals) InForce(resource, backendSet string, generation int64, adds []string, now time.Time) *Refusal {
	r.mu.Lock()
	defer r.mu.Unlock()
	rej := r.by[refusalKey{resource, backendSet}]
	if rej == nil || rej.generation != generation || !slices.Equal(rej.adds, adds) || !now.Before(rej.RetryAt) {
		return nil
	}
	return rej
}

// Put records that OCI refused a write adding adds, and returns when they
// are tried again: after first, doubled for each refusal of the same
// additions in a row, at most last.
func (r *Refusals) Put(resource, backendSet string, generation int64, adds []string, err error, now time.Time, first, last time.Duration) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.by == nil {
		r.by = map[refusalKey]*Refusal{}
	}
	k := refusalKey{resource, backendSet}
	rej := r.by[k]
	if rej == nil || rej.generation != generation || !slices.Equal(rej.adds, adds) {
		rej = &Refusal{generation: generation, adds: slices.Clone(adds)}
		r.by[k] = rej
	}
	rej.Err = err
	rej.RetryAt = now.Add(min(first<<min(rej.refusals, 20), last))
	rej.refusals++
	return rej.RetryAt
}

// Clear drops the backend set's refusal once a write with its additions
// went through.
func (r *Refusals) Clear(resource, backendSet string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.by, refusalKey{resource, backendSet})
}

// Forget drops the refusals of a resource that is gone.
func (r *Refusals) Forget(resource string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k := range r.by {
		if k.resource == resource {
			delete(r.by, k)
		}
	}
}
