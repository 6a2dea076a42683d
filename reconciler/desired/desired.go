// Package desired computes, as a pure function of an LBRegistrar spec and a
// view of the cluster, which backends each of its backend sets should hold.
//
// Nodes are chosen the way Kubernetes' own service controller chooses them
// for load balancers (KEP-3458): a node is left out while it is being
// deleted, when it carries the node.kubernetes.io/exclude-from-external-load-balancers
// label, or when the cluster autoscaler has tainted it ToBeDeletedByClusterAutoscaler.
// Readiness is not a filter unless Options.RequireReady asks for it, because
// the load balancer's own health check already takes a NotReady node out of
// rotation, and because filtering on it empties a backend set exactly when a
// control-plane blip marks every node NotReady.
//
// A node is registered by an InternalIP of the family its backend set
// takes (Options.BackendSets): an NLB backend set's ipVersion, IPv4 or IPv6. A
// backend set that does not say (a classic load balancer's) takes a node's
// first IPv4 InternalIP, else its first IPv6 one. A node with no InternalIP
// of the family is left out of that backend set and reported; addresses are
// written in canonical form, so IPv6 text written differently is the same
// address. In a backend set that preserves the client's source address, OCI
// selects backends by instance, so a node's backend also names its instance
// OCID (targetId), from spec.providerID as Oracle's cloud controller
// manager reads it; a node without one is left out there and reported.
//
// A Service target registers the NodePort of the Service port it names (by
// name or number). With filterByEndpoints, or when the Service has
// externalTrafficPolicy: Local (where a node without a local endpoint drops
// the traffic), only nodes hosting a ready endpoint in the Service's
// discovery/v1 EndpointSlices are registered.
//
// The result never asks for an empty backend set: when a backend set cannot
// be computed with certainty (a missing Service or NodePort, no eligible
// node, no ready endpoint) it is Held, and whoever applies it keeps what is
// registered.
package desired

import (
	"cmp"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
)

// TaintToBeDeletedByClusterAutoscaler marks a node the cluster autoscaler is removing.
const TaintToBeDeletedByClusterAutoscaler = "ToBeDeletedByClusterAutoscaler"

// Reasons reported in Issues and Held backend sets.
const (
	ReasonServiceNotFound        = "ServiceNotFound"
	ReasonServiceTypeUnsupported = "ServiceTypeUnsupported"
	ReasonServicePortNotFound    = "ServicePortNotFound"
	ReasonServicePortProtocol    = "ServicePortProtocol"
	ReasonNodePortNotAllocated   = "NodePortNotAllocated"
	ReasonInvalidNodeSelector    = "InvalidNodeSelector"
	ReasonNoEligibleNodes        = "NoEligibleNodes"
	ReasonNoReadyEndpoints       = "NoReadyEndpoints"
	ReasonNoReadyNodes           = "NoReadyNodes"
	ReasonNodeWithoutAddress     = "NodeWithoutAddress"
	ReasonNodeWithoutInstanceID  = "NodeWithoutInstanceID"
	ReasonDuplicateBackend       = "DuplicateBackend"
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
	// backend set not in it takes Preferred addresses.
	BackendSets map[string]Takes
}

// Takes is what a backend set takes of a node.
type Takes struct {
	Family Family
	// Instance is set for a backend set that preserves the client's source
	// address: OCI selects its backends by instance, so each names the
	// node's instance OCID too.
	Instance bool
}

// Family is the IP family of the addresses a backend set takes.
type Family int

const (
	// Preferred is a node's IPv4 InternalIP, else its IPv6 one.
	Preferred Family = iota
	IPv4
	IPv6
)

func (f Family) String() string {
	return [...]string{"IPv4 or IPv6", "IPv4", "IPv6"}[f]
}

// Cluster is the part of the cluster the desired state depends on.
type Cluster struct {
	Nodes    []*corev1.Node
	Services map[types.NamespacedName]*corev1.Service
	// EndpointSlices holds each Service's slices, keyed by the Service.
	EndpointSlices map[types.NamespacedName][]*discoveryv1.EndpointSlice
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
}

// Result is the desired state of every backend set a spec names.
type Result struct {
	BackendSets []BackendSet // sorted by name
	Issues      []Issue
}

// node is an eligible node reduced to what registration needs: its first
// InternalIP of each family, in canonical form, and its instance OCID, ""
// for none.
type node struct {
	name     string
	ipv4     string
	ipv6     string
	instance string
}

// address is the node's address for a backend set of family f, or "".
func (n node) address(f Family) string {
	switch {
	case f == IPv6:
		return n.ipv6
	case f == IPv4 || n.ipv4 != "":
		return n.ipv4
	}
	return n.ipv6
}

// Compute returns the desired backends of every backend set in spec.
func Compute(spec *v1beta1.LBRegistrarSpec, c Cluster, o Options) Result {
	var r Result
	nodes, issues := eligibleNodes(spec.NodeSelector, c.Nodes, o)
	r.Issues = append(r.Issues, issues...)

	type key struct {
		ip   string
		port int32
	}
	// A backend set usually has one target, whose backends come out of
	// targetBackends already sorted (nodes are sorted by address, the port
	// is one): they are used as they are. Only a second target into the same
	// set needs the map that merges and checks duplicates.
	type acc struct {
		resolved   bool
		first      []Backend
		backends   map[key]Backend
		held       *Issue
		noAddress  map[string]bool // nodes with no address of the backend set's family
		noInstance map[string]bool // nodes with no instance OCID, where the backend set takes one
	}
	sets := map[string]*acc{}
	for i := range spec.Services {
		t := &spec.Services[i]
		a := sets[t.BackendSetName]
		if a == nil {
			a = &acc{}
			sets[t.BackendSetName] = a
		}
		backends, left, issue := targetBackends(i, t, nodes, c, o.BackendSets[t.BackendSetName])
		a.noAddress = addNames(a.noAddress, left.noAddress)
		a.noInstance = addNames(a.noInstance, left.noInstance)
		if issue != nil {
			r.Issues = append(r.Issues, *issue)
			if a.held == nil {
				a.held = issue
			}
			continue
		}
		if !a.resolved {
			a.resolved, a.first = true, backends
			continue
		}
		if a.backends == nil {
			a.backends = make(map[key]Backend, len(a.first)+len(backends))
			for _, b := range a.first {
				a.backends[key{b.IP, b.Port}] = b
			}
		}
		for _, b := range backends {
			k := key{b.IP, b.Port}
			if prev, ok := a.backends[k]; ok {
				if prev.Weight != b.Weight {
					r.Issues = append(r.Issues, Issue{ReasonDuplicateBackend, fmt.Sprintf(
						"services[%d] registers %s in backend set %q with weight %d, but an earlier entry registers it with weight %d; the earlier weight is used",
						i, b.Key(), t.BackendSetName, b.Weight, prev.Weight)})
				}
				continue
			}
			a.backends[k] = b
		}
	}

	for _, name := range slices.Sorted(maps.Keys(sets)) { // in order, so issues read the same every time
		a := sets[name]
		if len(a.noAddress) > 0 {
			r.Issues = append(r.Issues, Issue{ReasonNodeWithoutAddress, fmt.Sprintf(
				"backend set %q takes %s addresses; nodes without an InternalIP of that family are not registered there: %s",
				name, o.BackendSets[name].Family, summarize(slices.Sorted(maps.Keys(a.noAddress))))})
		}
		if len(a.noInstance) > 0 {
			r.Issues = append(r.Issues, Issue{ReasonNodeWithoutInstanceID, fmt.Sprintf(
				"backend set %q preserves the client's source address, so OCI takes its backends by instance; nodes whose spec.providerID names no OCI instance are not registered there: %s",
				name, summarize(slices.Sorted(maps.Keys(a.noInstance))))})
		}
		bs := BackendSet{Name: name, Held: a.held}
		if a.held == nil {
			bs.Backends = a.first
			if a.backends != nil {
				bs.Backends = make([]Backend, 0, len(a.backends))
				for _, b := range a.backends {
					bs.Backends = append(bs.Backends, b)
				}
				slices.SortFunc(bs.Backends, CompareBackends)
			}
			if len(bs.Backends) == 0 {
				bs.Backends = nil
				bs.Held = &Issue{ReasonNoEligibleNodes, fmt.Sprintf("no node qualifies for backend set %q; the registered backends are kept", name)}
				r.Issues = append(r.Issues, *bs.Held)
			}
		}
		r.BackendSets = append(r.BackendSets, bs)
	}
	return r
}

// CompareBackends orders backends by address, then port, as
// v1beta1.CompareBackends orders the ownership record.
func CompareBackends(a, b Backend) int {
	return cmp.Or(cmp.Compare(a.IP, b.IP), cmp.Compare(a.Port, b.Port))
}

// leftOut are the nodes a backend set could not take.
type leftOut struct {
	noAddress  []string // no address of the backend set's family
	noInstance []string // no instance OCID, which the backend set takes
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

// targetBackends resolves one spec.services entry into backends as its
// backend set takes them, and the nodes left out, or the issue that
// prevents it.
func targetBackends(i int, t *v1beta1.Target, nodes []node, c Cluster, takes Takes) ([]Backend, leftOut, *Issue) {
	port := t.NodePort
	onlyNodes := map[string]bool(nil)
	if t.NodePort == 0 {
		key := types.NamespacedName{Namespace: t.Namespace, Name: t.Name}
		svc := c.Services[key]
		if svc == nil {
			return nil, leftOut{}, &Issue{ReasonServiceNotFound, fmt.Sprintf("services[%d]: Service %s not found; backend set %q keeps its registered backends", i, key, t.BackendSetName)}
		}
		if svc.Spec.Type != corev1.ServiceTypeNodePort && svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
			return nil, leftOut{}, &Issue{ReasonServiceTypeUnsupported, fmt.Sprintf("services[%d]: Service %s is of type %s; only NodePort and LoadBalancer Services have node ports", i, key, svc.Spec.Type)}
		}
		sp, other := servicePort(svc, t)
		if sp == nil && other != "" {
			return nil, leftOut{}, &Issue{ReasonServicePortProtocol, fmt.Sprintf("services[%d]: port %s of Service %s is %s, not TCP: load balancer backends take a TCP node port (a classic load balancer forwards TCP only); for another protocol, give the node port as nodePort", i, t.Port.String(), key, other)}
		}
		if sp == nil {
			return nil, leftOut{}, &Issue{ReasonServicePortNotFound, fmt.Sprintf("services[%d]: Service %s has no port %s", i, key, t.Port.String())}
		}
		if sp.NodePort == 0 {
			return nil, leftOut{}, &Issue{ReasonNodePortNotAllocated, fmt.Sprintf("services[%d]: port %s of Service %s has no NodePort allocated", i, t.Port.String(), key)}
		}
		port = sp.NodePort
		if t.FilterByEndpoints || svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal {
			onlyNodes = ServingNodes(key, sp, c.EndpointSlices[key])
			if len(onlyNodes) == 0 {
				return nil, leftOut{}, &Issue{ReasonNoReadyEndpoints, fmt.Sprintf("services[%d]: Service %s has no ready endpoint on any node, nor a terminating one still serving; backend set %q keeps its registered backends", i, key, t.BackendSetName)}
			}
		}
	}
	out := make([]Backend, 0, len(nodes))
	var left leftOut
	for _, n := range nodes {
		if onlyNodes != nil && !onlyNodes[n.name] {
			continue
		}
		b := Backend{IP: n.address(takes.Family), Port: port, Weight: t.Weight}
		if takes.Instance {
			b.TargetID = n.instance
		}
		switch {
		case b.IP == "":
			left.noAddress = append(left.noAddress, n.name)
		case takes.Instance && b.TargetID == "":
			left.noInstance = append(left.noInstance, n.name)
		default:
			out = append(out, b)
		}
	}
	// Nodes are in the order of their preferred address; a backend set of
	// another family may need sorting. Two nodes reporting one address make
	// one backend.
	if !slices.IsSortedFunc(out, CompareBackends) {
		slices.SortStableFunc(out, CompareBackends)
	}
	out = slices.CompactFunc(out, func(a, b Backend) bool { return a.IP == b.IP })
	return out, left, nil
}

// servicePort is the TCP port of svc that t names by name or number. A
// Service may give one number to a TCP and a UDP port (each with its own
// node port, both proxied by kube-proxy); the TCP one is chosen, whatever
// the order, since a load balancer's backends take TCP. When t names only
// ports of other protocols, other says which, and no port is chosen.
func servicePort(svc *corev1.Service, t *v1beta1.Target) (_ *corev1.ServicePort, other corev1.Protocol) {
	if t.Port == nil {
		return nil, ""
	}
	for j := range svc.Spec.Ports {
		p := &svc.Spec.Ports[j]
		named := p.Name == t.Port.StrVal
		if t.Port.Type == intstr.Int {
			named = p.Port == t.Port.IntVal
		}
		switch {
		case !named:
		case p.Protocol == corev1.ProtocolTCP || p.Protocol == "": // the API server's default
			return p, ""
		default:
			other = p.Protocol
		}
	}
	return nil, other
}

// ServingNodes is the set of nodes on which kube-proxy would send the
// Service's traffic to a local endpoint: a node with a ready endpoint, or,
// where it has none, a serving one that is terminating (KEP-1669,
// ProxyTerminatingEndpoints). So a node whose pods are being replaced in a
// rolling update keeps its registration while the old pod still serves,
// though the new one is not ready yet.
//
// The conditions are read as discovery/v1 defines them: ready unset means
// ready, serving unset defers to ready, terminating unset means not
// terminating. Only IPv4 and IPv6 slices of this Service (by the
// kubernetes.io/service-name label, in its namespace) count; FQDN slices
// and slices of other Services are ignored.
//
// And only slices that serve port: kube-proxy keys endpoints by the name
// and protocol of the ports a slice lists, ignoring a port with no name or
// no number (pkg/proxy/endpointslicecache.go), and slices hold endpoints
// that share one set of ports, so a pod without the port is in a slice
// without it, and its node does not serve that port.
func ServingNodes(service types.NamespacedName, port *corev1.ServicePort, slices []*discoveryv1.EndpointSlice) map[string]bool {
	out := map[string]bool{}
	for _, s := range slices {
		if s.Namespace != service.Namespace || s.Labels[discoveryv1.LabelServiceName] != service.Name ||
			(s.AddressType != discoveryv1.AddressTypeIPv4 && s.AddressType != discoveryv1.AddressTypeIPv6) ||
			!servesPort(s, port) {
			continue
		}
		for j := range s.Endpoints {
			ep := &s.Endpoints[j]
			if ep.NodeName == nil || *ep.NodeName == "" {
				continue
			}
			if servesTraffic(ep.Conditions) {
				out[*ep.NodeName] = true
			}
		}
	}
	return out
}

// servesPort reports whether slice lists port, by name and protocol, with a
// number.
func servesPort(slice *discoveryv1.EndpointSlice, port *corev1.ServicePort) bool {
	for _, p := range slice.Ports {
		if p.Name != nil && *p.Name == port.Name && p.Port != nil && *p.Port != 0 && protocol(p.Protocol) == protocol(&port.Protocol) {
			return true
		}
	}
	return false
}

// protocol is p, or TCP, the API server's default, when it is unset.
func protocol(p *corev1.Protocol) corev1.Protocol {
	if p == nil || *p == "" {
		return corev1.ProtocolTCP
	}
	return *p
}

// servesTraffic reports whether kube-proxy would use an endpoint for local
// traffic: it is ready, or it is terminating and still serving (which only
// matters on a node with no ready endpoint; see ServingNodes).
func servesTraffic(c discoveryv1.EndpointConditions) bool {
	ready := c.Ready == nil || *c.Ready
	if ready {
		return true
	}
	serving := ready
	if c.Serving != nil {
		serving = *c.Serving
	}
	return serving && c.Terminating != nil && *c.Terminating
}

// eligibleNodes filters and addresses the nodes once for every target.
func eligibleNodes(selector *metav1.LabelSelector, all []*corev1.Node, o Options) ([]node, []Issue) {
	var issues []Issue
	sel := labels.Everything()
	if selector != nil {
		s, err := metav1.LabelSelectorAsSelector(selector)
		if err != nil {
			return nil, []Issue{{ReasonInvalidNodeSelector, fmt.Sprintf("spec.nodeSelector: %v", err)}}
		}
		sel = s
	}
	candidates := make([]*corev1.Node, 0, len(all))
	ready := 0
	for _, n := range all {
		if !Eligible(n) || !sel.Matches(labels.Set(n.Labels)) {
			continue
		}
		candidates = append(candidates, n)
		if IsReady(n) {
			ready++
		}
	}
	filterReady := o.RequireReady
	if filterReady && ready == 0 && len(candidates) > 0 {
		filterReady = false
		issues = append(issues, Issue{ReasonNoReadyNodes, fmt.Sprintf("none of the %d eligible nodes is Ready; readiness is ignored until one is", len(candidates))})
	}
	out := make([]node, 0, len(candidates))
	var noAddress []string
	for _, n := range candidates {
		if filterReady && !IsReady(n) {
			continue
		}
		v4, v6 := InternalIPs(n)
		if v4 == "" && v6 == "" {
			noAddress = append(noAddress, n.Name)
			continue
		}
		out = append(out, node{name: n.Name, ipv4: v4, ipv6: v6, instance: InstanceID(n)})
	}
	// Sorted by address, so each target's backends are usually in backend
	// order already.
	slices.SortStableFunc(out, func(a, b node) int {
		return cmp.Or(cmp.Compare(a.address(Preferred), b.address(Preferred)), cmp.Compare(a.ipv6, b.ipv6))
	})
	if len(noAddress) > 0 {
		slices.Sort(noAddress)
		issues = append(issues, Issue{ReasonNodeWithoutAddress, fmt.Sprintf("nodes without an InternalIP are not registered: %s", summarize(noAddress))})
	}
	return out, issues
}

func summarize(names []string) string {
	const shown = 5
	if len(names) <= shown {
		return fmt.Sprint(names)
	}
	return fmt.Sprintf("%v and %d more", names[:shown], len(names)-shown)
}

// Eligible reports whether a node may back a load balancer at all, as the
// Kubernetes service controller decides it.
func Eligible(n *corev1.Node) bool {
	if n.DeletionTimestamp != nil {
		return false
	}
	// The exclusion label counts by its value, as Kubernetes' cloud
	// provider code reads it since kubernetes/kubernetes#131085: "false"
	// keeps the node; "true", an empty or an unparsable value excludes it.
	if v, labelled := n.Labels[corev1.LabelNodeExcludeBalancers]; labelled {
		if excluded, err := strconv.ParseBool(v); err != nil || excluded {
			return false
		}
	}
	for _, t := range n.Spec.Taints {
		if t.Key == TaintToBeDeletedByClusterAutoscaler {
			return false
		}
	}
	return true
}

// IsReady reports whether the node's Ready condition is True.
func IsReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// InternalIPs are a node's first IPv4 and first IPv6 InternalIP, in
// canonical form, "" where it has none.
func InternalIPs(n *corev1.Node) (ipv4, ipv6 string) {
	for _, a := range n.Status.Addresses {
		if a.Type != corev1.NodeInternalIP {
			continue
		}
		ip, err := netip.ParseAddr(a.Address)
		switch {
		case err != nil:
		case ip.Unmap().Is4():
			if ipv4 == "" {
				ipv4 = ip.Unmap().String()
			}
		case ipv6 == "":
			ipv6 = ip.WithZone("").String()
		}
	}
	return ipv4, ipv6
}

// NodeChanged reports whether an update to a node can change any desired
// state: its eligibility, labels (for nodeSelector), addresses, instance or
// readiness.
func NodeChanged(old, cur *corev1.Node) bool {
	return Eligible(old) != Eligible(cur) ||
		!labels.Equals(old.Labels, cur.Labels) ||
		!sameAddresses(old, cur) || InstanceID(old) != InstanceID(cur) ||
		IsReady(old) != IsReady(cur)
}

// InstanceID is the OCI instance OCID of a node, from its spec.providerID,
// which OKE and Oracle's cloud controller manager write as
// oci://ocid1.instance... or the bare OCID; "" when it names none.
func InstanceID(n *corev1.Node) string {
	id := strings.TrimPrefix(n.Spec.ProviderID, "oci://")
	if !strings.HasPrefix(id, "ocid1.instance.") {
		return ""
	}
	return id
}

func sameAddresses(a, b *corev1.Node) bool {
	a4, a6 := InternalIPs(a)
	b4, b6 := InternalIPs(b)
	return a4 == b4 && a6 == b6
}
