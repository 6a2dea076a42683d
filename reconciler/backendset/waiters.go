package backendset

import (
	"slices"
	"sync"
)

// Waiters are, per load balancer, the backend sets whose additions its
// backend limit withholds (a limit, or OCI refusing them), in the order
// they began to wait: the room that others' backends leave there goes to
// them first. Without it, a resource churning many backends takes every
// slot another frees, and the other, whose old backends went, waits with
// an empty backend set (aws-load-balancer-controller registers targets
// per target group with no such sharing; OCI's limit is per load
// balancer, "512 backend servers total" or "1024"). It is kept in memory
// only. The zero value is ready to use.
type Waiters struct {
	mu sync.Mutex
	by map[string][]waiter // by load balancer, oldest first
}

type waiter struct {
	resource, backendSet string
	withheld             int
}

// Set records that n additions of the resource's backend set on lb are
// withheld (0: none, and it waits no more). One that waits already keeps
// its place.
func (w *Waiters) Set(lb, resource, backendSet string, n int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	queue := w.by[lb]
	i := slices.IndexFunc(queue, func(x waiter) bool { return x.resource == resource && x.backendSet == backendSet })
	switch {
	case n == 0 && i < 0:
		return
	case n == 0:
		queue = slices.Delete(queue, i, i+1)
	case i < 0:
		queue = append(queue, waiter{resource: resource, backendSet: backendSet, withheld: n})
	default:
		queue[i].withheld = n
	}
	if w.by == nil {
		w.by = map[string][]waiter{}
	}
	if len(queue) == 0 {
		delete(w.by, lb)
		return
	}
	w.by[lb] = queue
}

// Ahead is the room lb must keep for the backend sets that began to wait
// before this one (every waiting one, when this one does not wait): the
// additions they wait for.
func (w *Waiters) Ahead(lb, resource, backendSet string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, x := range w.by[lb] {
		if x.resource == resource && x.backendSet == backendSet {
			break
		}
		n += x.withheld
	}
	return n
}

// Of are the resources waiting on lb, oldest first, each once.
func (w *Waiters) Of(lb string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, x := range w.by[lb] {
		if !slices.Contains(out, x.resource) {
			out = append(out, x.resource)
		}
	}
	return out
}

// Forget drops the waits of a resource that is gone.
func (w *Waiters) Forget(resource string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for lb, queue := range w.by {
		queue = slices.DeleteFunc(queue, func(x waiter) bool { return x.resource == resource })
		if len(queue) == 0 {
			delete(w.by, lb)
		} else {
			w.by[lb] = queue
		}
	}
}
