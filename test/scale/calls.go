package scale

import (
	"slices"
	"time"

	"github.com/peppy-ratio/lbregistrar/reconciler/oci"
	"github.com/peppy-ratio/lbregistrar/test/ociemu"
)

// FirstWrites are when the emulator accepted the first write since since,
// of any load balancer (first) and of the load balancer whose first write
// came last (last).
func FirstWrites(emu *ociemu.Emulator, since time.Time) (first, last time.Time, ok bool) {
	byLB := map[string]time.Time{}
	for _, wr := range emu.WorkRequests() {
		if at, seen := byLB[wr.LoadBalancerID]; !wr.TimeAccepted.Before(since) && (!seen || wr.TimeAccepted.Before(at)) {
			byLB[wr.LoadBalancerID] = wr.TimeAccepted
		}
	}
	for _, at := range byLB {
		if first.IsZero() || at.Before(first) {
			first = at
		}
		if at.After(last) {
			last = at
		}
	}
	return first, last, len(byLB) > 0
}

// ResyncsOf splits each load balancer's calls into its resyncs, those
// done: one reads the backend sets of its resource, then, once it has them
// all and written what it must, reads their health; so each resync of a
// load balancer (there is one resource per load balancer) begins with the
// first call after a health read, and a resync is done once the next has
// begun.
func ResyncsOf(calls []ociemu.Call) map[string][][]ociemu.Call {
	byLB := map[string][]ociemu.Call{}
	for _, c := range calls {
		byLB[c.LoadBalancerID] = append(byLB[c.LoadBalancerID], c)
	}
	out := map[string][][]ociemu.Call{}
	for lb, calls := range byLB {
		slices.SortStableFunc(calls, func(a, b ociemu.Call) int { return a.Time.Compare(b.Time) })
		first := 0
		for i := 1; i < len(calls); i++ {
			if ReadOf(calls[i-1].Operation) == "health" && ReadOf(calls[i].Operation) != "health" {
				out[lb] = append(out[lb], calls[first:i])
				first = i
			}
		}
	}
	return out
}

// KindOf names the kind of load balancer an OCID is.
func KindOf(id string) string {
	if oci.IsNetworkLoadBalancer(id) {
		return "network"
	}
	return "classic"
}

// ReadOf classes an OCI operation: a write, a read of a backend set's
// backends, a read of health, or another call (work requests).
func ReadOf(operation string) string {
	switch operation {
	case "UpdateBackendSet", "CreateBackend", "UpdateBackend", "DeleteBackend":
		return "write"
	case "GetBackendSet", "ListBackendSets", "ListBackends", "GetBackend", "GetLoadBalancer", "GetNetworkLoadBalancer":
		return "read"
	case "GetBackendSetHealth", "GetBackendHealth":
		return "health"
	default:
		return "other"
	}
}
