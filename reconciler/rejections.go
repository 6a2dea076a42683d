package reconciler

import "sync"

// rejections remembers the backend set writes OCI rejected for good (a work
// request that failed for bad input or a limit), per resource and spec
// generation: sending the same write again cannot help, so it is not sent
// again until the spec changes, and Ready keeps OCI's reason meanwhile. It
// is kept in memory only; after a restart the write is tried once more.
// The zero value is ready to use.
type rejections struct {
	mu sync.Mutex
	by map[rejectionKey]rejection
}

type rejectionKey struct{ resource, backendSet string }

type rejection struct {
	generation int64
	err        error
}

// get returns why the backend set's write was rejected at this generation,
// or nil; a rejection at an older generation is dropped.
func (r *rejections) get(resource, backendSet string, generation int64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := rejectionKey{resource, backendSet}
	rej, ok := r.by[k]
	if ok && rej.generation == generation {
		return rej.err
	}
	delete(r.by, k)
	return nil
}

func (r *rejections) put(resource, backendSet string, generation int64, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.by == nil {
		r.by = map[rejectionKey]rejection{}
	}
	r.by[rejectionKey{resource, backendSet}] = rejection{generation: generation, err: err}
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
