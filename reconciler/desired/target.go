package desired

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
)

// targetBackends resolves one target (a spec.services item) into backends as its
// backend set takes them, and the nodes left out for want of an address of
// its family, or the issue that prevents it; and, for a target that
// follows the endpoints, what it makes of the pods waiting for their gate
// (ns: the nodes it may register, and why others are not).
func targetBackends(i int, t *v1beta1.Target, nodes []node, ns nodeSet, c Cluster, takes Takes) resolved {
	port := t.NodePort
	onlyNodes := map[string]bool(nil)
	var stands Stands
	if t.NodePort == 0 {
		key := types.NamespacedName{Namespace: t.Namespace, Name: t.Name}
		svc, sp, issue := resolveServicePort(i, t, c, takes)
		if issue != nil {
			return resolved{hold: issue}
		}
		if sp.NodePort == 0 {
			return resolved{hold: &Issue{v1beta1.ReasonNodePortNotAllocated, fmt.Sprintf("services[%d]: port %s of Service %s has no NodePort allocated", i, t.Port.String(), key)}}
		}
		port = sp.NodePort
		if !answersOn(svc, takes.Family) {
			return resolved{hold: &Issue{v1beta1.ReasonServiceIPFamily, fmt.Sprintf("services[%d]: Service %s has no %s ClusterIP (ipFamilies %v), so kube-proxy does not answer its node port on %s addresses; backend set %q takes only those, and keeps its registered backends", i, key, takes.Family, svc.Spec.IPFamilies, takes.Family, t.BackendSetName)}}
		}
		if local := svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal; t.FilterByEndpoints || local {
			onlyNodes = ServingNodes(key, sp, c.EndpointSlices[key], c.Gated, local)
			stands = nodeStands(i, key, sp, local, c.EndpointSlices[key], c.Gated, ns, takes.Family)
			if len(onlyNodes) == 0 {
				return resolved{stands: stands, hold: &Issue{v1beta1.ReasonNoReadyEndpoints, noEndpoints(i, key, t.BackendSetName, local)}}
			}
		}
	}
	out := make([]Backend, 0, len(nodes))
	var noAddress []string
	for _, n := range nodes {
		if onlyNodes != nil && !onlyNodes[n.name] {
			continue
		}
		b := Backend{IP: n.address(takes.Family), Port: port, Weight: t.Weight}
		// An instance OCID names its primary VNIC's IPv4 address; Oracle's
		// cloud controller manager sends IPv6 backends by address alone
		// (load_balancer_spec.go getBackends: TargetId nil).
		if takes.Instance && takes.Family == IPv4 {
			b.TargetID = n.instance
		}
		// A node with no instance OCID (no spec.providerID, as in
		// self-managed clusters) goes by address alone, as the original
		// operator registered every node: OCI takes or refuses it.
		if b.IP == "" {
			noAddress = append(noAddress, n.name)
			continue
		}
		out = append(out, b)
	}
	// Nodes are in the order of their preferred address; a backend set of
	// another family may need sorting. Two nodes reporting one address make
	// one backend.
	if !slices.IsSortedFunc(out, CompareBackends) {
		slices.SortStableFunc(out, CompareBackends)
	}
	out = slices.CompactFunc(out, func(a, b Backend) bool { return a.IP == b.IP })
	return resolved{backends: out, noAddress: noAddress, stands: stands}
}

// resolveServicePort finds the Service port target i names, in a protocol
// its backend set's listeners forward, or the issue that holds the set: the
// Service missing or of a type the target cannot register, the listeners
// unread, no such port.
func resolveServicePort(i int, t *v1beta1.Target, c Cluster, takes Takes) (*corev1.Service, *corev1.ServicePort, *Issue) {
	key := types.NamespacedName{Namespace: t.Namespace, Name: t.Name}
	svc := c.Services[key]
	switch {
	case svc == nil:
		return nil, nil, &Issue{v1beta1.ReasonServiceNotFound, fmt.Sprintf("services[%d]: Service %s not found; backend set %q keeps its registered backends", i, key, t.BackendSetName)}
	case t.Pods() && svc.Spec.Type == corev1.ServiceTypeExternalName:
		return nil, nil, &Issue{v1beta1.ReasonServiceTypeUnsupported, fmt.Sprintf("services[%d]: Service %s is of type ExternalName, which has no endpoints to register", i, key)}
	case !t.Pods() && svc.Spec.Type != corev1.ServiceTypeNodePort && svc.Spec.Type != corev1.ServiceTypeLoadBalancer:
		return nil, nil, &Issue{v1beta1.ReasonServiceTypeUnsupported, fmt.Sprintf("services[%d]: Service %s is of type %s; only NodePort and LoadBalancer Services have node ports", i, key, svc.Spec.Type)}
	case takes.ProtocolsUnread != "":
		return nil, nil, &Issue{v1beta1.ReasonListenersUnread, fmt.Sprintf("services[%d]: the listeners of backend set %q could not be read (%s), so which protocol's port of Service %s it takes is not known; it keeps its registered backends", i, t.BackendSetName, takes.ProtocolsUnread, key)}
	}
	carried := takes.forwarded()
	sp, other := servicePort(svc, t, carried)
	if sp == nil && other != "" {
		hint := ""
		if !t.Pods() {
			hint = ", or give the node port as nodePort"
		}
		return nil, nil, &Issue{v1beta1.ReasonServicePortProtocol, fmt.Sprintf("services[%d]: port %s of Service %s is %s, but backend set %q's listeners forward %v (a classic load balancer, or a backend set no listener uses, TCP); name a port of that protocol%s", i, t.Port.String(), key, other, t.BackendSetName, carried, hint)}
	}
	if sp == nil {
		return nil, nil, &Issue{v1beta1.ReasonServicePortNotFound, fmt.Sprintf("services[%d]: Service %s has no port %s", i, key, t.Port.String())}
	}
	return svc, sp, nil
}

// answersOn reports whether kube-proxy answers svc's node port on node
// addresses of family f: it programs a Service only for the IP families it
// has a ClusterIP of (spec.ipFamilies; pkg/proxy skips a Service of another
// family), so a single-stack Service is reached on nodes' addresses of its
// family alone.
func answersOn(svc *corev1.Service, f Family) bool {
	var v4, v6 bool
	for _, fam := range svc.Spec.IPFamilies {
		v4 = v4 || fam == corev1.IPv4Protocol
		v6 = v6 || fam == corev1.IPv6Protocol
	}
	if !v4 && !v6 { // written before ipFamilies existed: the ClusterIPs say
		for _, ip := range append([]string{svc.Spec.ClusterIP}, svc.Spec.ClusterIPs...) {
			if addr, err := netip.ParseAddr(ip); err == nil {
				v4 = v4 || addr.Unmap().Is4()
				v6 = v6 || !addr.Unmap().Is4()
			}
		}
	}
	if v4 == v6 { // unknown, or dual-stack: any family answers
		return true
	}
	return (f == IPv4) == v4
}

// servicePort is the first port of svc that t names by name or number in
// a protocol the backend set's listeners forward (carried). A Service may
// give one number to a TCP and a UDP port (each with its own node port,
// both proxied by kube-proxy), so the protocol picks between them. When t
// names only ports of other protocols, other says which, and no port is
// chosen.
func servicePort(svc *corev1.Service, t *v1beta1.Target, carried []corev1.Protocol) (_ *corev1.ServicePort, other corev1.Protocol) {
	if t.Port == nil {
		return nil, ""
	}
	for j := range svc.Spec.Ports {
		p := &svc.Spec.Ports[j]
		named := p.Name == t.Port.StrVal
		if t.Port.Type == intstr.Int {
			named = p.Port == t.Port.IntVal
		}
		switch protocol := cmp.Or(p.Protocol, corev1.ProtocolTCP); { // TCP: the API server's default
		case !named:
		case slices.Contains(carried, protocol):
			return p, ""
		default:
			other = protocol
		}
	}
	return nil, other
}

// noEndpoints says why target i registers no node.
func noEndpoints(i int, key types.NamespacedName, set string, local bool) string {
	if local {
		return fmt.Sprintf("services[%d]: Service %s (externalTrafficPolicy Local) has no ready endpoint on any node, and kube-proxy's health check fails where the only ones are terminating; backend set %q keeps its registered backends", i, key, set)
	}
	return fmt.Sprintf("services[%d]: Service %s has no ready endpoint on any node, nor a terminating one still serving; backend set %q keeps its registered backends", i, key, set)
}
