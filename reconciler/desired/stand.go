package desired

import (
	"fmt"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Stand is what a backend set's desired state makes of one pod that a
// target of it gates (GatesPods) and that waits only for its gate
// (AwaitsGate): the backends that stand for the pod there, or why the
// controller writes none for it. The gates controller decides from these
// alone (readiness.Decide), so a gate waits only for a backend Compute
// wants written.
type Stand struct {
	Entry int // the target's index in spec.services
	// Backends are the ip:port (plan.Key's form) standing for the pod: its
	// endpoint's address at the slice's port for a Pod target, its node's
	// address at the node port for a node target.
	Backends []string
	// Healthy: the gate waits for OCI to report the backend OK, not only
	// to hold it serving (see healthWaits).
	Healthy bool
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
		if cur.Entry != stand.Entry {
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
// serves the port in the backend set's family at an address the load
// balancer reaches (podBackend, as PodEndpoints registers it).
func podStands(i int, service types.NamespacedName, port *corev1.ServicePort, endpointSlices []*discoveryv1.EndpointSlice, f Family, nodes map[string]*corev1.Node, gated GatedPods) Stands {
	var out Stands
	forGated(service, endpointSlices, gated, func(s *discoveryv1.EndpointSlice, ep *discoveryv1.Endpoint, pod *corev1.Pod) {
		st := Stand{Entry: i}
		number := slicePort(s, port)
		switch {
		case number == 0:
			st.Skip = fmt.Sprintf("its endpoint does not serve port %s of Service %s", port.Name, service)
		case s.AddressType != addressType(f):
			st.Skip = fmt.Sprintf("its address %s is not %s, the family of the backend set", first(ep.Addresses), f)
		default:
			ap, unreachable := podBackend(ep, number, nodes)
			switch {
			case !ap.IsValid():
				st.Skip = fmt.Sprintf("its endpoint's address %q does not parse", first(ep.Addresses))
			case unreachable != "":
				st.Skip = unreachable
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
		st := Stand{Entry: i}
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

// podBackend is the backend ep stands for at port number (not valid when
// its address does not parse), and why the load balancer cannot reach it,
// "" when it can: PodEndpoints and podStands decide alike.
func podBackend(ep *discoveryv1.Endpoint, number int32, nodes map[string]*corev1.Node) (netip.AddrPort, string) {
	addr, err := netip.ParseAddr(first(ep.Addresses))
	if err != nil {
		return netip.AddrPort{}, ""
	}
	ap := netip.AddrPortFrom(addr.Unmap(), uint16(number))
	if ep.NodeName != nil && inPodRange(ap.Addr(), nodes[*ep.NodeName]) {
		return ap, fmt.Sprintf("its address %s is in the pod range of node %s (an overlay network), which the load balancer cannot reach", ap.Addr(), *ep.NodeName)
	}
	return ap, ""
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
