package desired

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
)

// podBackends resolves a Pod target (spec.services[i], targetType Pod)
// into its backends: each ready endpoint of the Service port, by the
// address and port its EndpointSlices give (and its private IP's OCID
// where the backend set selects its backends by instance), or the issue
// that holds its backend set; and what it makes of the pods waiting for
// their gate. Endpoints the load balancer cannot take are left out, and
// reported. A Service the EndpointSlice controller says has no endpoint
// at all wants none (publishedEmpty): its pods are gone.
func podBackends(i int, t *v1beta1.Target, c Cluster, takes Takes) resolved {
	key := types.NamespacedName{Namespace: t.Namespace, Name: t.Name}
	_, sp, hold := resolveServicePort(i, t, c, takes)
	if hold != nil {
		return resolved{hold: hold}
	}
	view := newPodView(c, takes)
	res := resolved{stands: podStands(i, key, sp, c.EndpointSlices[key], takes.Family, view, c.Gated)}
	backends, left := podEndpoints(key, sp, c.EndpointSlices[key], takes.Family, view, c.Gated)
	for j := range backends {
		backends[j].Weight = t.Weight
	}
	if unread := left[v1beta1.ReasonPrivateIPsUnread]; len(unread) > 0 {
		return resolved{stands: res.stands, hold: &Issue{v1beta1.ReasonPrivateIPsUnread, fmt.Sprintf(
			"services[%d]: backend set %q preserves the client's source, so OCI takes pods by their private IP's OCID, and the private IPs of the nodes of Service %s's endpoints could not be read: %s; it keeps its registered backends (the identity needs read of instances, vnic-attachments and private-ips)",
			i, t.BackendSetName, key, Summarize(unread))}}
	}
	if unreachable := left[v1beta1.ReasonPodAddressUnreachable]; len(unreachable) > 0 {
		res.issues = append(res.issues, Issue{v1beta1.ReasonPodAddressUnreachable, fmt.Sprintf(
			"services[%d]: endpoints of Service %s have addresses of their node's pod range (spec.podCIDRs: an overlay network), which the load balancer cannot reach, and are not registered in backend set %q: %s; use VCN-native pod networking, or targetType NodePort",
			i, key, t.BackendSetName, Summarize(unreachable))})
	}
	if unknown := left[v1beta1.ReasonPodPrivateIPNotFound]; len(unknown) > 0 {
		res.issues = append(res.issues, Issue{v1beta1.ReasonPodPrivateIPNotFound, fmt.Sprintf(
			"services[%d]: backend set %q preserves the client's source, so OCI takes pods by their private IP's OCID, and endpoints of Service %s have none OCI lists on their node's VNICs; they are not registered: %s",
			i, t.BackendSetName, key, Summarize(unknown))})
	}
	if foreign := notPods(key, sp, c.EndpointSlices[key]); len(foreign) > 0 {
		res.issues = append(res.issues, Issue{v1beta1.ReasonEndpointNotAPod, fmt.Sprintf(
			"services[%d]: endpoints of Service %s name no pod of namespace %s and are not registered in backend set %q: %s; a Pod target registers the Service's own pods only",
			i, key, key.Namespace, t.BackendSetName, Summarize(foreign))})
	}
	switch {
	case len(backends) > 0:
		res.backends = backends
	case publishedEmpty(key, c.EndpointSlices[key]):
		res.emptied = true
		res.issues = append(res.issues, Issue{v1beta1.ReasonEndpointsGone, fmt.Sprintf(
			"services[%d]: Service %s has no endpoints (the EndpointSlice controller publishes none): the backends of its pods in backend set %q are drained, then removed", i, key, t.BackendSetName)})
	default:
		res.hold = &Issue{v1beta1.ReasonNoReadyEndpoints, fmt.Sprintf(
			"services[%d]: Service %s has no ready %s endpoint of port %s the load balancer can take; backend set %q keeps its registered backends", i, key, takes.Family, t.Port.String(), t.BackendSetName)}
	}
	return res
}

// endpointSliceController is the managed-by label value of the slices
// Kubernetes' EndpointSlice controller publishes.
const endpointSliceController = "endpointslice-controller.k8s.io"

// publishedEmpty reports whether the EndpointSlice controller says the
// Service has no endpoint at all. For a Service that selects no pod it
// keeps one placeholder slice, with neither ports nor endpoints (k8s.io/
// endpointslice reconciler.go: "When no endpoint slices would usually
// exist, we need to add a placeholder"), so the pods are gone: scaled to
// zero, or deleted. Every slice of the Service must list none, and one of
// them must be that controller's. The view is in doubt, and the backends
// kept, when no slice exists at all, when the slices are another
// manager's, or when endpoints exist but none is ready (pods starting, a
// node cut off, pods terminating).
func publishedEmpty(service types.NamespacedName, endpointSlices []*discoveryv1.EndpointSlice) bool {
	published := false
	for _, s := range endpointSlices {
		if s.Namespace != service.Namespace || s.Labels[discoveryv1.LabelServiceName] != service.Name {
			continue
		}
		if len(s.Endpoints) > 0 {
			return false
		}
		published = published || s.Labels[discoveryv1.LabelManagedBy] == endpointSliceController
	}
	return published
}

// podEndpoints are the ready endpoints of the Service's port, of family
// f, as backends (without weight) sorted by address and port, and the
// endpoints left out, by the reason (podSkip) for which they are, sorted.
//
// An endpoint is read as kube-proxy reads it (pkg/proxy/endpointslicecache.go):
// its first address, ready unset meaning ready, in slices of this Service
// (by the kubernetes.io/service-name label, in its namespace) whose ports
// list the Service port by name and protocol, that slice's number being
// the port to register (the Service's targetPort, resolved per pod). A
// terminating endpoint is not ready (Kubernetes 1.26 on), so its backend
// is drained like any other that goes. An endpoint whose pod is ready but
// for lbregistrar's readiness gate counts as ready (GatedPods.awaiting).
// How the backend set takes each is podBackend's to say.
func podEndpoints(service types.NamespacedName, port *corev1.ServicePort, endpointSlices []*discoveryv1.EndpointSlice, f Family, view podView, gated GatedPods) (backends []Backend, left map[string][]string) {
	seen := map[netip.AddrPort]bool{}
	for _, s := range endpointSlices {
		if s.Namespace != service.Namespace || s.Labels[discoveryv1.LabelServiceName] != service.Name || s.AddressType != addressType(f) {
			continue
		}
		number := slicePort(s, port)
		if number == 0 {
			continue
		}
		for j := range s.Endpoints {
			ep := &s.Endpoints[j]
			if ready, _ := conditions(ep.Conditions); !ready && !gated.awaiting(ep) || len(ep.Addresses) == 0 {
				continue
			}
			if !podOf(ep, service.Namespace) {
				continue // not a pod of the Service's namespace: not registered (podOf)
			}
			b, skip := view.podBackend(ep, number)
			ap := b.addrPort()
			if !ap.IsValid() || seen[ap] {
				continue // unparsable; or one endpoint in two slices, as the EndpointSlice controller may briefly have it
			}
			seen[ap] = true
			if skip != nil {
				if left == nil {
					left = map[string][]string{}
				}
				left[skip.reason] = append(left[skip.reason], skip.item)
				continue
			}
			backends = append(backends, b)
		}
	}
	slices.SortFunc(backends, CompareBackends)
	for reason, items := range left {
		slices.Sort(items)
		left[reason] = slices.Compact(items)
	}
	return backends, left
}

// slicePort is the number slice gives the Service port (by name and
// protocol), or 0.
func slicePort(slice *discoveryv1.EndpointSlice, port *corev1.ServicePort) int32 {
	for _, p := range slice.Ports {
		if p.Name != nil && *p.Name == port.Name && p.Port != nil && *p.Port > 0 && *p.Port <= 65535 && protocol(p.Protocol) == protocol(&port.Protocol) {
			return *p.Port
		}
	}
	return 0
}

// inPodRange reports whether addr lies in one of node's spec.podCIDRs.
func inPodRange(addr netip.Addr, node *corev1.Node) bool {
	if node == nil {
		return false
	}
	for _, cidr := range append([]string{node.Spec.PodCIDR}, node.Spec.PodCIDRs...) {
		if p, err := netip.ParsePrefix(strings.TrimSpace(cidr)); err == nil && p.Contains(addr) {
			return true
		}
	}
	return false
}

// kubeProxyHealthzPort is kube-proxy's healthz port (its
// --healthz-bind-address default, 0.0.0.0:10256), which load balancers of
// node targets often probe.
const kubeProxyHealthzPort = 10256

// nodeHealthPort is the issue of a backend set with Pod targets whose
// health checker probes, on every backend, a port only nodes answer:
// kube-proxy's healthz, or a node port or health check node port of one
// of the Pod targets' Services. OCI then finds every pod backend CRITICAL
// (a readiness gate never opens); nil otherwise.
func nodeHealthPort(set string, port int32, services []*corev1.Service) *Issue {
	if port == 0 || len(services) == 0 {
		return nil
	}
	nodeOnly := port == kubeProxyHealthzPort
	for _, svc := range services {
		nodeOnly = nodeOnly || svc.Spec.HealthCheckNodePort == port || slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.NodePort == port })
	}
	if !nodeOnly {
		return nil
	}
	return &Issue{v1beta1.ReasonHealthCheckNodePort, fmt.Sprintf(
		"backend set %q's health checker probes port %d of every backend, which nodes answer (kube-proxy's healthz, or a node port) and pods do not: OCI finds each pod backend CRITICAL, and no readiness gate opens; set the health checker's port to 0 (each backend's own port) or to a port the pods answer", set, port)}
}

// podOf reports whether ep names a Pod of namespace: a Pod target
// registers only those, as aws-load-balancer-controller and
// oci-native-ingress-controller take only endpoints whose targetRef is a
// pod. An endpoint of a slice written by another hand (a Service without
// selector, a writer of EndpointSlices) that names no pod, or another
// namespace's, would put what its writer chose, or another team's pod,
// behind the load balancer.
func podOf(ep *discoveryv1.Endpoint, namespace string) bool {
	ref := ep.TargetRef
	return ref != nil && ref.Kind == "Pod" && ref.Namespace == namespace && ref.Name != ""
}

// notPods are the ready endpoints of the Service's port that name no pod
// of its namespace (podOf), by address, sorted.
func notPods(service types.NamespacedName, port *corev1.ServicePort, endpointSlices []*discoveryv1.EndpointSlice) []string {
	var out []string
	for _, s := range endpointSlices {
		if s.Namespace != service.Namespace || s.Labels[discoveryv1.LabelServiceName] != service.Name || slicePort(s, port) == 0 {
			continue
		}
		for j := range s.Endpoints {
			ep := &s.Endpoints[j]
			if ready, _ := conditions(ep.Conditions); ready && !podOf(ep, service.Namespace) {
				out = append(out, first(ep.Addresses))
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
