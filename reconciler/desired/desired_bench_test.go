package desired

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
)

// benchCluster is a cluster of nodes and services, each Service with
// endpoints on every tenth node.
func benchCluster(nodes, services int) (Cluster, []v1beta1.Target) {
	c := Cluster{
		Services:       map[types.NamespacedName]*corev1.Service{},
		EndpointSlices: map[types.NamespacedName][]*discoveryv1.EndpointSlice{},
	}
	for i := range nodes {
		n := mkNode(fmt.Sprintf("node-%d", i), fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255))
		if i%50 == 0 {
			excluded(n)
		}
		c.Nodes = append(c.Nodes, n)
	}
	var targets []v1beta1.Target
	for s := range services {
		key := types.NamespacedName{Namespace: "ns", Name: fmt.Sprintf("svc-%d", s)}
		c.Services[key] = mkService(key.Namespace, key.Name, corev1.ServiceTypeNodePort,
			corev1.ServicePort{Name: "http", Port: 80, NodePort: int32(30000 + s)})
		slice := sliceOf(key.Namespace, key.Name, discoveryv1.AddressTypeIPv4)
		for i := s % 10; i < nodes; i += 10 {
			slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{NodeName: ptr.To(fmt.Sprintf("node-%d", i))})
		}
		c.EndpointSlices[key] = []*discoveryv1.EndpointSlice{slice}
		port := intstr.FromString("http")
		targets = append(targets, v1beta1.Target{Name: key.Name, Namespace: key.Namespace, Port: &port,
			BackendSetName: fmt.Sprintf("bs-%d", s), Weight: 1})
	}
	return c, targets
}

// BenchmarkDesiredState computes the desired state of one resource with 50
// Service targets over 5,000 nodes: every node (baseline), and nodes
// narrowed to those hosting ready endpoints (filterByEndpoints).
func BenchmarkDesiredState(b *testing.B) {
	c, targets := benchCluster(5000, 50)
	for _, variant := range []string{"baseline", "filterByEndpoints"} {
		b.Run("5000nodes-50services/"+variant, func(b *testing.B) {
			spec := v1beta1.LBRegistrarSpec{Services: append([]v1beta1.Target(nil), targets...)}
			for i := range spec.Services {
				spec.Services[i].FilterByEndpoints = variant == "filterByEndpoints"
			}
			b.ReportAllocs()
			var backends int
			for b.Loop() {
				r := Compute(&spec, c, Options{})
				backends = 0
				for _, bs := range r.BackendSets {
					backends += len(bs.Backends)
				}
			}
			b.ReportMetric(float64(backends), "backends")
		})
	}
}
