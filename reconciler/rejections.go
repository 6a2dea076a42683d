package reconciler

import (
	"slices"
	"sync"
	"time"
)

// rejections remembers the backend set writes OCI refused for what they
// hold (oci.IsRefused: bad input, a limit), per resource: the additions
// such a write carried are not sent again, unchanged, until their retry is
// due, which backs off with each refusal (Backoff.Max, doubling, at most
// the resync period). Meanwhile the backend set is written without them,
// so removals, weight changes and drains never wait for additions that do
// not fit, and Ready keeps OCI's reason. New spec, or other additions (the
// wanted nodes changed), are tried at once. It is kept in memory only;
// after a restart the write is tried once more. The zero value is ready
// to use.
type rejections struct {
	mu sync.Mutex
	by map[rejectionKey]*rejection
}

type rejectionKey struct{ resource, backendSet string }

// rejection is a refused write: at which generation, of which additions,
// why, how often in a row, and when its additions are tried again.
type rejection struct {
	generation int64
	adds       []string
	err        error
	refusals   int
	retryAt    time.Time
}

// inForce returns the rejection of the backend set's additions at this
// generation whose retry is not due at now, or nil.
func (r *rejections) inForce(resource, backendSet string, generation int64, adds []string, now time.Time) *rejection {
	r.mu.Lock()
	defer r.mu.Unlock()
	rej := r.by[rejectionKey{resource, backendSet}]
	if rej == nil || rej.generation != generation || !slices.Equal(rej.adds, adds) || !now.Before(rej.retryAt) {
		return nil
	}
	return rej
}

// put records that OCI refused a write adding adds, and returns when they
// are tried again: after first, doubled for each refusal of the same
// additions in a row, at most last.
func (r *rejections) put(resource, backendSet string, generation int64, adds []string, err error, now time.Time, first, last time.Duration) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.by == nil {
		r.by = map[rejectionKey]*rejection{}
	}
	k := rejectionKey{resource, backendSet}
	rej := r.by[k]
	if rej == nil || rej.generation != generation || !slices.Equal(rej.adds, adds) {
		rej = &rejection{generation: generation, adds: slices.Clone(adds)}
		r.by[k] = rej
	}
	rej.err = err
	rej.retryAt = now.Add(min(first<<min(rej.refusals, 20), last))
	rej.refusals++
	return rej.retryAt
}

// clear drops the backend set's rejection once a write with its additions
// went through.
func (r *rejections) clear(resource, backendSet string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.by, rejectionKey{resource, backendSet})
}

// forget drops the rejections of a resource that is gone.
func (r *rejections) forget(resource string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k := range r.by {
		if k.resource == resource {
			delete(r.by, k)
		}
	}
}
