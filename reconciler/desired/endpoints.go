package desired

import (
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
)

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
