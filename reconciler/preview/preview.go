// Package preview says what a write would do to a backend set, in the terms
// lbregistrar plan prints, serve --dry-run reports instead of writing, and
// the debug view lists: added, removed, re-weighted, drained and kept
// backends. It also keeps the writes a dry run did not make.
//
// It only describes: it reads nothing and writes nothing.
package preview

import (
	"fmt"
	"strings"
	"time"

	"github.com/peppy-ratio/lbregistrar/reconciler/plan"
)

// BackendSetChange is what a reconcile would do to one backend set. serve
// --dry-run reports the ones that change instead of writing them, and
// lbregistrar plan prints them all.
type BackendSetChange struct {
	LBRegistrar    string `json:"lbregistrar"`
	LoadBalancerID string `json:"loadBalancerId"`
	BackendSet     string `json:"backendSet"`
	// Mode is apply; hold when the desired state is in doubt and what is
	// registered stays; retire when the spec no longer names the backend
	// set (drained, then removed); remove in a plan of a deletion.
	Mode       string          `json:"mode"`
	Added      []BackendWeight `json:"added,omitempty"`
	Removed    []BackendWeight `json:"removed,omitempty"`
	Reweighted []Reweighted    `json:"reweighted,omitempty"`
	// Restored are wanted backends found drained or offline, which the
	// write makes serve again.
	Restored []BackendWeight `json:"restored,omitempty"`
	// Draining are owned backends no longer wanted (their node left), kept
	// drained until Until, then removed.
	Draining []DrainingBackend `json:"draining,omitempty"`
	// Kept are the backends the write would leave as they are, this
	// resource's and foreign ones alike.
	Kept []KeptBackend `json:"kept,omitempty"`
	// Withheld are wanted backends (ip:port) the write leaves out because
	// OCI's backend limit for the set (Limit) has no room for them: added
	// once others leave. A migration from node ports to pods, which has
	// both registered for a while, shows here before it starts.
	Withheld []string `json:"withheld,omitempty"`
	Limit    int      `json:"limit,omitempty"`
	// NotFound is set when the load balancer or backend set does not exist.
	NotFound bool `json:"notFound,omitempty"`
	// Error says why the backend set could not be planned.
	Error string `json:"error,omitempty"`
}

// BackendWeight is a backend (ip:port) and its weight.
type BackendWeight struct {
	Backend string `json:"backend"`
	Weight  int32  `json:"weight"`
}

// Reweighted is a backend whose weight would change.
type Reweighted struct {
	Backend string `json:"backend"`
	From    int32  `json:"from"`
	To      int32  `json:"to"`
}

// DrainingBackend is a departing node's backend, drained (no new
// connections; open ones finish) until Until, then removed. Starts is set
// when this write marks it drain.
type DrainingBackend struct {
	Backend string    `json:"backend"`
	Weight  int32     `json:"weight"`
	Until   time.Time `json:"until"`
	Starts  bool      `json:"starts,omitempty"`
}

// KeptBackend is a backend left as it is; a foreign one is not this
// resource's to change.
type KeptBackend struct {
	Backend string `json:"backend"`
	Weight  int32  `json:"weight"`
	Foreign bool   `json:"foreign,omitempty"`
}

// Changed reports whether the backend set would be written.
func (c *BackendSetChange) Changed() bool {
	return len(c.Added)+len(c.Removed)+len(c.Reweighted)+len(c.Restored)+len(c.drainStarts()) > 0
}

// drainStarts are the backends this write marks drain.
func (c *BackendSetChange) drainStarts() []BackendWeight {
	var out []BackendWeight
	for _, b := range c.Draining {
		if b.Starts {
			out = append(out, BackendWeight{b.Backend, b.Weight})
		}
	}
	return out
}

// Summary counts what would change.
func (c *BackendSetChange) Summary() string {
	summary := fmt.Sprintf("%d to add, %d to remove, %d to re-weight", len(c.Added), len(c.Removed), len(c.Reweighted))
	if len(c.Restored) > 0 {
		summary += fmt.Sprintf(", %d to serve again", len(c.Restored))
	}
	if n := len(c.drainStarts()); n > 0 {
		summary += fmt.Sprintf(", %d to drain", n)
	}
	return summary
}

// detailLimit bounds the backends Details names per list, so an Event's
// note stays within the API server's 1 kB.
const detailLimit = 5

// Details is Summary naming the backends, at most detailLimit per list.
func (c *BackendSetChange) Details() string {
	var parts []string
	list := func(verb string, items []string) {
		if len(items) == 0 {
			return
		}
		more := ""
		if len(items) > detailLimit {
			more = fmt.Sprintf(" and %d more", len(items)-detailLimit)
			items = items[:detailLimit]
		}
		parts = append(parts, fmt.Sprintf("%s %s%s", verb, strings.Join(items, ", "), more))
	}
	weighted := func(bs []BackendWeight) []string {
		out := make([]string, len(bs))
		for i, b := range bs {
			out[i] = fmt.Sprintf("%s weight %d", b.Backend, b.Weight)
		}
		return out
	}
	reweighted := make([]string, len(c.Reweighted))
	for i, b := range c.Reweighted {
		reweighted[i] = fmt.Sprintf("%s weight %d to %d", b.Backend, b.From, b.To)
	}
	list("add", weighted(c.Added))
	list("remove", weighted(c.Removed))
	list("re-weight", reweighted)
	list("serve again", weighted(c.Restored))
	list("drain", weighted(c.drainStarts()))
	return strings.Join(parts, "; ")
}

// Describe fills c with what p does to the backend set that has current,
// drains lasting drainFor, OCI letting it have limit backends.
func Describe(c BackendSetChange, current []plan.Backend, p *plan.Plan, drainFor time.Duration, limit int) BackendSetChange {
	drainUntil := map[string]time.Time{}
	for _, b := range p.Draining {
		drainUntil[plan.Key(b.IP, b.Port)] = b.Since.Add(drainFor)
	}
	owned := map[string]bool{}
	for _, b := range p.Owned {
		owned[plan.Key(b.IP, b.Port)] = true
	}
	after := map[string]plan.Backend{}
	for _, b := range p.Backends {
		after[b.Key()] = b
	}
	for _, b := range current {
		k := b.Key()
		next, stays := after[k]
		switch {
		case !stays:
			c.Removed = append(c.Removed, BackendWeight{k, b.Weight})
		case next.Weight != b.Weight:
			c.Reweighted = append(c.Reweighted, Reweighted{k, b.Weight, next.Weight})
		case (b.Drain || b.Offline) && !next.Drain && !next.Offline:
			c.Restored = append(c.Restored, BackendWeight{k, b.Weight})
		case !drainUntil[k].IsZero():
			c.Draining = append(c.Draining, DrainingBackend{k, b.Weight, drainUntil[k], !b.Drain && next.Drain})
		default:
			c.Kept = append(c.Kept, KeptBackend{k, b.Weight, !owned[k]})
		}
	}
	for _, k := range p.Added {
		c.Added = append(c.Added, BackendWeight{k, after[k].Weight})
	}
	if len(p.Withheld) > 0 {
		c.Withheld, c.Limit = p.Withheld, limit
	}
	return c
}
