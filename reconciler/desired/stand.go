package desired

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
)

// Stand is what a backend set's desired state makes of one pod that a
// target of it gates (GatesPods) and that waits only for its gate
// (AwaitsGate): the backends that stand for the pod there, or why the
// controller writes none for it. The gates controller decides from these
// alone (readiness.Decide), so a gate waits only for a backend Compute
// wants written.
type Stand struct {
	Target int // the target's index in spec.services
	// Backends are the ip:port (plan.Key's form) standing for the pod: its
	// endpoint's address at the slice's port for a Pod target, its node's
	// address at the node port for a node target.
	Backends []string
	// Healthy: the gate waits for OCI to report the backend OK, not only
	// to have it serving (see healthWaits).
	Healthy bool
	// Node: the backends are the pod's node's (a node target), not the
	// pod's own address.
	Node bool
	// Skip says why no backend is written for the pod here; its gate does
	// not wait for this target.
	Skip string
}

// Stands are the stands in one backend set, by pod UID.
type Stands map[types.UID][]Stand

// add records stand for pod; a pod listed twice (two slices, two
// addresses) stands by every backend found, and is skipped only when no
// endpoint of it gives one.
func (s Stands) add(uid types.UID, stand Stand) Stands {
	if s == nil {
		s = Stands{}
	}
	for k := range s[uid] {
		cur := &s[uid][k]
		if cur.Target != stand.Target {
			continue
		}
		if stand.Skip == "" {
			cur.Skip = ""
			cur.Backends = append(cur.Backends, stand.Backends...)
			slices.Sort(cur.Backends)
			cur.Backends = slices.Compact(cur.Backends)
		}
		return s
	}
	s[uid] = append(s[uid], stand)
	return s
}

// merge adds other's stands to s.
func (s Stands) merge(other Stands) Stands {
	for uid, stands := range other {
		for _, st := range stands {
			s = s.add(uid, st)
		}
	}
	return s
}

// podStands are the stands of target i (a Pod target) for the gated pods
// that the Service's slices list: the pod's endpoint where its slice
// serves the port in the backend set's family as a backend the set takes
// (podBackend, as podEndpoints registers it). A pod whose node's private
// IPs could not be read stands by its address: its gate waits, and hears
// that the set is held.
func podStands(i int, service types.NamespacedName, port *corev1.ServicePort, endpointSlices []*discoveryv1.EndpointSlice, f Family, view podView, gated GatedPods) Stands {
	var out Stands
	forGated(service, endpointSlices, gated, func(s *discoveryv1.EndpointSlice, ep *discoveryv1.Endpoint, pod *corev1.Pod) {
		st := Stand{Target: i}
		number := slicePort(s, port)
		switch {
		case number == 0:
			st.Skip = fmt.Sprintf("its endpoint does not serve port %s of Service %s", port.Name, service)
		case s.AddressType != addressType(f):
			st.Skip = fmt.Sprintf("its address %s is not %s, the family of the backend set", first(ep.Addresses), f)
		default:
			b, skip := view.podBackend(ep, number)
			ap := b.addrPort()
			switch {
			case !ap.IsValid():
				st.Skip = fmt.Sprintf("its endpoint's address %q does not parse", first(ep.Addresses))
			case skip != nil && skip.reason != v1beta1.ReasonPrivateIPsUnread:
				st.Skip = skip.why
			default:
				st.Backends, st.Healthy = []string{ap.String()}, true
			}
		}
		out = out.add(pod.UID, st)
	})
	return out
}

// nodeStands are the stands of target i (a node target that follows the
// endpoints; local: externalTrafficPolicy Local) for the gated pods the
// Service's slices list: the pod's node, at the node port of sp, where
// Compute registers that node (ns says which it does, and why not others).
func nodeStands(i int, service types.NamespacedName, sp *corev1.ServicePort, local bool, endpointSlices []*discoveryv1.EndpointSlice, gated GatedPods, ns nodeSet, f Family) Stands {
	var out Stands
	forGated(service, endpointSlices, gated, func(s *discoveryv1.EndpointSlice, ep *discoveryv1.Endpoint, pod *corev1.Pod) {
		st := Stand{Target: i, Node: true}
		switch {
		case !servesPort(s, sp):
			st.Skip = fmt.Sprintf("its endpoint does not serve port %s of Service %s", sp.Name, service)
		case ep.NodeName == nil || *ep.NodeName == "":
			st.Skip = "its endpoint names no node"
		default:
			ip, why := ns.address(*ep.NodeName, f)
			if st.Skip = why; why == "" {
				st.Backends = []string{netip.AddrPortFrom(netip.MustParseAddr(ip), uint16(sp.NodePort)).String()}
				st.Healthy = !healthWaits(ep, pod, service, sp, endpointSlices, local)
			}
		}
		out = out.add(pod.UID, st)
	})
	return out
}

// forGated calls fn for each endpoint of the Service's slices whose pod
// waits only for its gate.
func forGated(service types.NamespacedName, endpointSlices []*discoveryv1.EndpointSlice, gated GatedPods, fn func(*discoveryv1.EndpointSlice, *discoveryv1.Endpoint, *corev1.Pod)) {
	if len(gated) == 0 {
		return
	}
	for _, s := range endpointSlices {
		if s.Namespace != service.Namespace || s.Labels[discoveryv1.LabelServiceName] != service.Name {
			continue
		}
		for j := range s.Endpoints {
			if pod := gated.awaitingPod(&s.Endpoints[j]); pod != nil && pod.Namespace == service.Namespace {
				fn(s, &s.Endpoints[j], pod)
			}
		}
	}
}

// healthWaits reports whether a node target's health check, for the pod
// of ep, can pass only once that pod itself is Ready: kube-proxy answers a
// node port only with a ready endpoint of the Service, anywhere, or, with
// externalTrafficPolicy Local, on that node (its health check node port
// says the same; pkg/proxy/healthcheck). With no such endpoint but the
// pod's, the load balancer cannot find the node healthy before the gate
// lets the pod be Ready, so the gate waits for the node's registration
// alone.
func healthWaits(ep *discoveryv1.Endpoint, pod *corev1.Pod, service types.NamespacedName, sp *corev1.ServicePort, endpointSlices []*discoveryv1.EndpointSlice, local bool) bool {
	for _, s := range endpointSlices {
		if s.Namespace != service.Namespace || s.Labels[discoveryv1.LabelServiceName] != service.Name || !servesPort(s, sp) {
			continue
		}
		for k := range s.Endpoints {
			other := &s.Endpoints[k]
			if ready, _ := conditions(other.Conditions); !ready || other.TargetRef != nil && other.TargetRef.UID == pod.UID {
				continue
			}
			if !local || other.NodeName != nil && ep.NodeName != nil && *other.NodeName == *ep.NodeName {
				return false
			}
		}
	}
	return true
}

// podView is what says how a backend set takes a pod's endpoint: the
// nodes (an address of its node's pod range is an overlay's), and, where
// the set selects its backends by instance, the private IPs of the pods'
// nodes (nil otherwise).
type podView struct {
	nodes      map[string]*corev1.Node
	privateIPs *PrivateIPs
}

func newPodView(c Cluster, takes Takes) podView {
	v := podView{nodes: c.NodesByName}
	if byPrivateIP(takes) {
		v.privateIPs = &c.PrivateIPs
	}
	return v
}

// byPrivateIP reports whether a backend set takes pods by their private
// IP's OCID: IPv4 pods, in a set that selects its backends by instance
// ("If enabled, the compute instance selects the backend servers": OCI
// docs, Enabling Network Load Balancer Backend Set Source Preservation).
// An NLB backend's targetId is "The IP OCID/Instance OCID associated with
// the backend server" (SDK networkloadbalancer.Backend), and a pod's
// address is a private IP of its node's VNICs under OKE's VCN-native pod
// networking. IPv6 pods go by address, as Oracle's cloud controller
// manager sends IPv6 backends (load_balancer_spec.go getBackends).
func byPrivateIP(t Takes) bool { return t.Instance && t.Family == IPv4 }

// podSkip is why a backend set does not take a pod's endpoint: the reason
// reported (a v1beta1 reason), the item it names in the report, and why,
// for the pod's gate.
type podSkip struct{ reason, item, why string }

// podBackend is the backend ep stands for at port number (its address not
// valid when the endpoint's does not parse), and why the backend set does
// not take it, nil when it does: podEndpoints and podStands decide alike.
func (v podView) podBackend(ep *discoveryv1.Endpoint, number int32) (Backend, *podSkip) {
	addr, err := netip.ParseAddr(first(ep.Addresses))
	if err != nil {
		return Backend{}, nil
	}
	addr = addr.Unmap()
	b := Backend{IP: addr.String(), Port: number}
	node := ""
	if ep.NodeName != nil {
		node = *ep.NodeName
	}
	if node != "" && inPodRange(addr, v.nodes[node]) {
		return b, &podSkip{v1beta1.ReasonPodAddressUnreachable, addr.String() + " on " + node,
			fmt.Sprintf("its address %s is in the pod range of node %s (an overlay network), which the load balancer cannot reach", addr, node)}
	}
	if v.privateIPs == nil {
		return b, nil
	}
	if why, unread := v.privateIPs.Unread[node]; unread && node != "" {
		return b, &podSkip{v1beta1.ReasonPrivateIPsUnread, "node " + node + ": " + why,
			fmt.Sprintf("the private IPs of its node %s could not be read", node)}
	}
	if b.TargetID = v.privateIPs.OCIDs[addr]; b.TargetID == "" {
		why := fmt.Sprintf("its address %s is no private IP OCI lists on the VNICs of its node %s, and the backend set takes pods by private IP", addr, node)
		switch {
		case node == "":
			why = fmt.Sprintf("its endpoint names no node, whose VNICs would list its address %s; the backend set takes pods by private IP", addr)
		case v.nodes[node] == nil || InstanceID(v.nodes[node]) == "":
			why = fmt.Sprintf("its node %s has no instance OCID (spec.providerID), whose VNICs would list its address %s; the backend set takes pods by private IP", node, addr)
		}
		return b, &podSkip{v1beta1.ReasonPodPrivateIPNotFound, addr.String() + " on " + cmp.Or(node, "no node"), why}
	}
	return b, nil
}

// addrPort is b's address and port, not valid when b has no address.
func (b Backend) addrPort() netip.AddrPort {
	addr, err := netip.ParseAddr(b.IP)
	if err != nil {
		return netip.AddrPort{}
	}
	return netip.AddrPortFrom(addr, uint16(b.Port))
}

// PrivateIPNodes are the nodes whose instances' private IPs Compute needs
// (Cluster.PrivateIPs), each with the addresses of its endpoints: those
// of the Pod targets' Services whose backend sets take pods by private IP.
func PrivateIPNodes(spec *v1beta1.LBRegistrarSpec, c Cluster, sets map[string]Takes) map[string][]netip.Addr {
	var out map[string][]netip.Addr
	for i := range spec.Services {
		t := &spec.Services[i]
		if !t.Pods() || !byPrivateIP(sets[t.BackendSetName]) {
			continue
		}
		key := types.NamespacedName{Namespace: t.Namespace, Name: t.Name}
		for _, s := range c.EndpointSlices[key] {
			if s.Namespace != key.Namespace || s.Labels[discoveryv1.LabelServiceName] != key.Name || s.AddressType != discoveryv1.AddressTypeIPv4 {
				continue
			}
			for j := range s.Endpoints {
				ep := &s.Endpoints[j]
				addr, err := netip.ParseAddr(first(ep.Addresses))
				if err != nil || ep.NodeName == nil || *ep.NodeName == "" {
					continue
				}
				if out == nil {
					out = map[string][]netip.Addr{}
				}
				out[*ep.NodeName] = append(out[*ep.NodeName], addr.Unmap())
			}
		}
	}
	for node, addrs := range out {
		slices.SortFunc(addrs, netip.Addr.Compare)
		out[node] = slices.Compact(addrs)
	}
	return out
}

func first(addresses []string) string {
	if len(addresses) == 0 {
		return ""
	}
	return addresses[0]
}

func addressType(f Family) discoveryv1.AddressType {
	if f == IPv6 {
		return discoveryv1.AddressTypeIPv6
	}
	return discoveryv1.AddressTypeIPv4
}

// nodeSet is what Compute registers of the nodes: the eligible ones by
// name, and why each other node it was shown is not registered.
type nodeSet struct {
	eligible map[string]node
	skipped  map[string]string
	selector bool // spec.nodeSelector is set: a node not shown was not selected
}

// address is the address of the named node in family f, or why the node is
// not registered.
func (ns nodeSet) address(name string, f Family) (string, string) {
	n, ok := ns.eligible[name]
	switch {
	case ok && n.address(f) != "":
		return n.address(f), ""
	case ok:
		return "", fmt.Sprintf("its node %s has no %s address, the family of the backend set", name, f)
	case ns.skipped[name] != "":
		return "", fmt.Sprintf("its node %s %s", name, ns.skipped[name])
	case ns.selector:
		return "", fmt.Sprintf("its node %s is not selected by spec.nodeSelector", name)
	}
	return "", fmt.Sprintf("its node %s is not known to the cluster", name)
}
