// Package desired computes, as a pure function of an LBRegistrar spec and a
// view of the cluster, which backends each of its backend sets should contain.
//
// Each rule is stated once, beside its code: which nodes (Eligible,
// IsReady and Options.RequireReady), by which address and instance
// (Addresses, InstanceID, and a backend set's Takes: its IP version and
// whether OCI selects its backends by instance), and, for a Service target,
// which node port and which nodes' endpoints count (ServingNodes, read as
// kube-proxy reads them). docs/reconciler.md ("Desired state") sets them
// beside what Kubernetes' service controller, Oracle's cloud controller
// manager and kube-proxy do.
//
// The result asks for an empty backend set only when a Pod target's
// Service has no endpoint as the EndpointSlice controller publishes it
// (publishedEmpty): when a backend set cannot be computed with certainty
// (a missing Service or NodePort, no eligible node, endpoints that exist
// but none ready, no slice at all) it is Held, and whoever applies it
// keeps what is registered.
package desired

import (
	"cmp"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
)

// Backend is one node address and port with the weight it is registered
// with, and the node's instance OCID where the backend set takes it.
type Backend struct {
	IP       string
	Port     int32
	Weight   int32
	TargetID string
}

// Key identifies a backend inside a backend set, as OCI does: ip:port.
func (b Backend) Key() string { return net.JoinHostPort(b.IP, fmt.Sprint(b.Port)) }

// Options tune node selection.
type Options struct {
	// RequireReady registers only nodes whose Ready condition is True. When
	// no eligible node is Ready the filter is dropped (and reported), so a
	// cluster-wide NotReady never empties a backend set.
	RequireReady bool
	// BackendSets says what each backend set takes of a node, by name; a
	// backend set not in it takes IPv4 addresses.
	BackendSets map[string]Takes
}

// Takes is what a backend set takes of a node.
type Takes struct {
	Family Family
	// Instance is set for a backend set that preserves the client's source
	// address: OCI selects its backends by instance, so each IPv4 backend
	// names the node's instance OCID too, or the pod's private IP OCID.
	Instance bool
	// Protocols are the protocols its listeners forward (an NLB's: TCP,
	// UDP or both); none means TCP, as every classic listener carries and
	// a backend set no listener uses yet is taken to.
	Protocols []corev1.Protocol
	// ProtocolsUnread says why its listeners could not be read; a target
	// that picks a Service's port by protocol is then held.
	ProtocolsUnread string
	// HealthPort is the port its health checker probes on every backend,
	// 0 for each backend's own.
	HealthPort int32
}

// forwarded are the protocols the backend set's listeners forward: its
// Protocols, or TCP.
func (t Takes) forwarded() []corev1.Protocol {
	if len(t.Protocols) == 0 {
		return []corev1.Protocol{corev1.ProtocolTCP}
	}
	return t.Protocols
}

// Family is the IP family of the addresses a backend set takes.
type Family int

// The families of addresses a backend set takes.
const (
	IPv4 Family = iota
	IPv6
)

func (f Family) String() string {
	return [...]string{"IPv4", "IPv6"}[f]
}

// Cluster is the part of the cluster the desired state depends on.
type Cluster struct {
	Nodes    []*corev1.Node
	Services map[types.NamespacedName]*corev1.Service
	// EndpointSlices has each Service's slices, keyed by the Service.
	EndpointSlices map[types.NamespacedName][]*discoveryv1.EndpointSlice
	// NodesByName has every node, by name, for Pod targets (nil when
	// the spec has none): an endpoint's node tells whether its address is
	// one the load balancer can reach (podEndpoints).
	NodesByName map[string]*corev1.Node
	// Gated has the pods of the EndpointSlices' not-ready endpoints that
	// carry lbregistrar's readiness gate: one that is ready but for it
	// counts as ready.
	Gated GatedPods
	// PrivateIPs are what OCI lists of the private IPs of the nodes that
	// PrivateIPNodes names: a backend set that selects its backends by
	// instance takes a pod by its private IP's OCID.
	PrivateIPs PrivateIPs
}

// PrivateIPs are private IP OCIDs by address, and, by node name, why the
// private IPs of a node's instance could not be read.
type PrivateIPs struct {
	OCIDs  map[netip.Addr]string
	Unread map[string]string
}

// resolved is what one target (a spec.services item) makes of the cluster: the
// backends it wants, the nodes left out for want of an address of the
// backend set's family, what it makes of the gated pods, what it reports,
// and the issue that holds its backend set, if any. emptied says it
// wants no backend on purpose: its Service has no endpoints.
type resolved struct {
	backends  []Backend
	noAddress []string
	stands    Stands
	issues    []Issue
	hold      *Issue
	emptied   bool
}

// Issue is something a user can act on; it makes the resource Degraded.
type Issue struct {
	Reason  string
	Message string
}

// BackendSet is the desired content of one backend set.
type BackendSet struct {
	Name     string
	Backends []Backend // sorted by IP, then port
	// Held is set when the content could not be computed with certainty;
	// the backend set must then keep what is registered.
	Held *Issue
	// Stands say, of each pod waiting for its readiness gate that a target
	// of this set gates, which backends stand for it or why none does.
	Stands Stands
	// PodBackends are the backends, by Key, that only Pod targets want.
	// One found registered by another hand is never adopted (plan.Input):
	// an EndpointSlice is the word of whoever may write one, and adopting
	// on it would let that writer have another tool's backend removed.
	PodBackends map[string]bool
}

// Result is the desired state of every backend set a spec names.
type Result struct {
	BackendSets []BackendSet // sorted by name
	Issues      []Issue
}

// Compute returns the desired backends of every backend set in spec.
func Compute(spec *v1beta1.LBRegistrarSpec, c Cluster, o Options) Result {
	var r Result
	var nodes []node
	var ns nodeSet
	if slices.ContainsFunc(spec.Services, func(t v1beta1.Target) bool { return !t.Pods() }) {
		var issues []Issue
		nodes, ns, issues = eligibleNodes(spec.NodeSelector, c.Nodes, o, len(c.Gated) > 0)
		r.Issues = append(r.Issues, issues...)
	}
	sets := map[string]*setBuilder{}
	for i := range spec.Services {
		t := &spec.Services[i]
		a := sets[t.BackendSetName]
		if a == nil {
			a = &setBuilder{}
			sets[t.BackendSetName] = a
		}
		var res resolved
		if t.Pods() {
			res = podBackends(i, t, c, o.BackendSets[t.BackendSetName])
		} else {
			res = targetBackends(i, t, nodes, ns, c, o.BackendSets[t.BackendSetName])
		}
		r.Issues = append(r.Issues, res.issues...)
		if svc := c.Services[types.NamespacedName{Namespace: t.Namespace, Name: t.Name}]; t.Pods() && svc != nil {
			a.pods = append(a.pods, svc)
		}
		a.take(i, t, res, &r.Issues)
	}
	for _, name := range slices.Sorted(maps.Keys(sets)) { // in order, so issues read the same every time
		r.BackendSets = append(r.BackendSets, sets[name].build(name, o, &r.Issues))
	}
	return r
}

// backendKey identifies a backend while targets are merged.
type backendKey struct {
	ip   string
	port int32
}

// setBuilder gathers what the targets into one backend set resolve to. A
// backend set usually has one target, whose backends come out of
// targetBackends already sorted (nodes are sorted by address, the port is
// one): they are used as they are. Only a second target into the same set
// needs the map that merges and checks duplicates.
type setBuilder struct {
	resolved  bool
	first     []Backend
	backends  map[backendKey]Backend
	held      *Issue
	noAddress map[string]bool // nodes with no address of the backend set's family
	stands    Stands
	// pods are the Services of its Pod targets.
	pods []*corev1.Service
	// emptied: a target wants no backend on purpose (its Service has
	// no endpoints); inDoubt: one resolved to none for want of a view
	// (no eligible node). Only the first may empty the set.
	emptied, inDoubt bool
	// podKeys and nodeKeys are the keys Pod and node targets want.
	podKeys, nodeKeys map[string]bool
}

// take adds what services[i], t, resolved to; a backend two targets
// register with different weights is an issue, the first weight kept.
func (a *setBuilder) take(i int, t *v1beta1.Target, res resolved, issues *[]Issue) {
	a.noAddress = addNames(a.noAddress, res.noAddress)
	a.stands = a.stands.merge(res.stands)
	if res.hold != nil {
		*issues = append(*issues, *res.hold)
		if a.held == nil {
			a.held = res.hold
		}
		return
	}
	backends := res.backends
	keys := &a.nodeKeys
	if t.Pods() {
		keys = &a.podKeys
	}
	for _, b := range backends {
		if *keys == nil {
			*keys = map[string]bool{}
		}
		(*keys)[b.Key()] = true
	}
	a.emptied = a.emptied || res.emptied
	a.inDoubt = a.inDoubt || len(backends) == 0 && !res.emptied
	if !a.resolved {
		a.resolved, a.first = true, backends
		return
	}
	if a.backends == nil {
		a.backends = make(map[backendKey]Backend, len(a.first)+len(backends))
		for _, b := range a.first {
			a.backends[backendKey{b.IP, b.Port}] = b
		}
	}
	for _, b := range backends {
		k := backendKey{b.IP, b.Port}
		if prev, ok := a.backends[k]; ok {
			if prev.Weight != b.Weight {
				*issues = append(*issues, Issue{v1beta1.ReasonDuplicateBackend, fmt.Sprintf(
					"services[%d] registers %s in backend set %q with weight %d, but an earlier target registers it with weight %d; the earlier weight is used",
					i, b.Key(), t.BackendSetName, b.Weight, prev.Weight)})
			}
			continue
		}
		a.backends[k] = b
	}
}

// build is the backend set name, from what its targets resolved to, with
// the issues of the set as a whole.
func (a *setBuilder) build(name string, o Options, issues *[]Issue) BackendSet {
	if len(a.noAddress) > 0 {
		*issues = append(*issues, Issue{v1beta1.ReasonNodeWithoutAddress, fmt.Sprintf(
			"backend set %q takes %s addresses; nodes without an address of that family (IPv4: an InternalIP; IPv6: an InternalIP or ExternalIP) are not registered there: %s",
			name, o.BackendSets[name].Family, Summarize(slices.Sorted(maps.Keys(a.noAddress))))})
	}
	if is := nodeHealthPort(name, o.BackendSets[name].HealthPort, a.pods); is != nil {
		*issues = append(*issues, *is)
	}
	bs := BackendSet{Name: name, Held: a.held, Stands: a.stands}
	for k := range a.podKeys {
		if !a.nodeKeys[k] {
			if bs.PodBackends == nil {
				bs.PodBackends = map[string]bool{}
			}
			bs.PodBackends[k] = true
		}
	}
	if a.held != nil {
		return bs
	}
	bs.Backends = a.first
	if a.backends != nil {
		bs.Backends = slices.SortedFunc(maps.Values(a.backends), CompareBackends)
	}
	if len(bs.Backends) == 0 {
		bs.Backends = nil
	}
	if bs.Backends == nil && (a.inDoubt || !a.emptied) {
		bs.Held = &Issue{v1beta1.ReasonNoEligibleNodes, fmt.Sprintf("no node qualifies for backend set %q; the registered backends are kept", name)}
		*issues = append(*issues, *bs.Held)
	}
	return bs
}

// CompareBackends orders backends by address, then port, as
// v1beta1.CompareBackends orders the ownership record.
func CompareBackends(a, b Backend) int {
	return cmp.Or(cmp.Compare(a.IP, b.IP), cmp.Compare(a.Port, b.Port))
}

func addNames(set map[string]bool, names []string) map[string]bool {
	for _, name := range names {
		if set == nil {
			set = map[string]bool{}
		}
		set[name] = true
	}
	return set
}
