package desired

import (
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// ServingNodes is the set of nodes whose local endpoints of the Service
// would take new connections, read as kube-proxy reads them
// (pkg/proxy/topology.go CategorizeEndpoints, KEP-1669):
//
//   - by default, a node with a ready endpoint, or, where it has none, a
//     serving one that is terminating: so a node whose pods are being
//     replaced in a rolling update keeps its registration while the old pod
//     still serves, though the new one is not ready yet;
//   - readyOnly (externalTrafficPolicy Local), a node with a ready endpoint
//     only: kube-proxy's health check node port fails on a node whose local
//     endpoints are all terminating (pkg/proxy/endpointschangetracker.go
//     getLocalReadyEndpointIPs), so a load balancer checking it sends the
//     node no new connections, and neither does lbregistrar: such a node is
//     drained, and serves again once a ready endpoint returns.
//
// The conditions are read as kube-proxy reads them
// (pkg/proxy/endpointslicecache.go): ready unset means ready, serving unset
// means serving, terminating unset means not terminating. Only IPv4 and
// IPv6 slices of this Service (by the kubernetes.io/service-name label, in
// its namespace) count; FQDN slices and slices of other Services are
// ignored.
//
// And only slices that serve port: kube-proxy keys endpoints by the name
// and protocol of the ports a slice lists, ignoring a port with no name or
// no number (pkg/proxy/endpointslicecache.go), and slices list endpoints
// that share one set of ports, so a pod without the port is in a slice
// without it, and its node does not serve that port.
//
// An endpoint whose pod is ready but for lbregistrar's readiness gate
// counts as ready (GatedPods.awaiting).
func ServingNodes(service types.NamespacedName, port *corev1.ServicePort, slices []*discoveryv1.EndpointSlice, gated GatedPods, readyOnly bool) map[string]bool {
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
			if ready, terminatingServing := conditions(ep.Conditions); ready || gated.awaiting(ep) || terminatingServing && !readyOnly {
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

// conditions are whether kube-proxy reads an endpoint as ready, and as
// terminating and still serving (pkg/proxy/endpointslicecache.go).
func conditions(c discoveryv1.EndpointConditions) (ready, terminatingServing bool) {
	ready = c.Ready == nil || *c.Ready
	serving := c.Serving == nil || *c.Serving
	terminating := c.Terminating != nil && *c.Terminating
	return ready, !ready && serving && terminating
}

// EndpointsChanged reports whether a slice's change, from old to cur, can
// change a desired state, stands included: its Service, manager, address
// type or ports, or an endpoint as the desired state reads it
// (endpointAsRead), with the gated pods as they are now. An endpoint whose
// pod is ready but for the gate reads as ready (GatedPods.awaiting), so
// one turning ready as its gate opens changes nothing: the gate opened
// because the load balancer has it. Unless a pod of the Service still
// awaits its gate: whether the others are truly ready says whether its
// node's health can pass (healthWaits), so then every change counts.
// others are the Service's other slices; with more of them a change
// counts no less. Both slices are read with
// today's pods, so a change of a pod's ReadyButForGate is its own event's
// to report (gates.GatedPodChanged).
func EndpointsChanged(old, cur *discoveryv1.EndpointSlice, others []*discoveryv1.EndpointSlice, gated GatedPods) bool {
	if old.Namespace != cur.Namespace || old.Labels[discoveryv1.LabelServiceName] != cur.Labels[discoveryv1.LabelServiceName] ||
		old.Labels[discoveryv1.LabelManagedBy] != cur.Labels[discoveryv1.LabelManagedBy] || old.AddressType != cur.AddressType ||
		len(old.Ports) != len(cur.Ports) || len(old.Endpoints) != len(cur.Endpoints) {
		return true
	}
	for _, s := range append([]*discoveryv1.EndpointSlice{old, cur}, others...) {
		for k := range s.Endpoints {
			if gated.awaitingPod(&s.Endpoints[k]) != nil {
				return true
			}
		}
	}
	for i := range old.Ports {
		a, b := old.Ports[i], cur.Ports[i]
		if ptr.Deref(a.Name, "") != ptr.Deref(b.Name, "") || ptr.Deref(a.Port, 0) != ptr.Deref(b.Port, 0) || protocol(a.Protocol) != protocol(b.Protocol) {
			return true
		}
	}
	for i := range old.Endpoints {
		if gated.endpointAsRead(&old.Endpoints[i]) != gated.endpointAsRead(&cur.Endpoints[i]) {
			return true
		}
	}
	return false
}

// endpointRead is what the desired state reads of an endpoint: its first
// address, node, pod, and conditions as kube-proxy reads them (unset
// ready and serving are true, unset terminating false).
type endpointRead struct {
	address, node               string
	pod                         corev1.ObjectReference
	ready, serving, terminating bool
}

// endpointAsRead is ep as the desired state reads it, an endpoint whose
// pod awaits the gate as ready and serving.
func (g GatedPods) endpointAsRead(ep *discoveryv1.Endpoint) endpointRead {
	r := endpointRead{node: ptr.Deref(ep.NodeName, ""),
		ready: ptr.Deref(ep.Conditions.Ready, true), serving: ptr.Deref(ep.Conditions.Serving, true), terminating: ptr.Deref(ep.Conditions.Terminating, false)}
	if len(ep.Addresses) > 0 {
		r.address = ep.Addresses[0]
	}
	if ref := ep.TargetRef; ref != nil {
		r.pod = corev1.ObjectReference{Kind: ref.Kind, Namespace: ref.Namespace, Name: ref.Name, UID: ref.UID}
	}
	if g.awaiting(ep) {
		r.ready, r.serving = true, true
	}
	return r
}
