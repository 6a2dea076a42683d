package decide

import (
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/reconciler/desired"
)

// readView reads the part of the cluster obj's desired state depends on:
// from the cache in the controller, from the API server in lbregistrar plan.
func readView(ctx context.Context, reader client.Reader, obj *v1beta1.LBRegistrar) (desired.Cluster, error) {
	var c desired.Cluster
	if err := readNodes(ctx, reader, obj, &c); err != nil {
		return c, err
	}
	c.Services = map[types.NamespacedName]*corev1.Service{}
	c.EndpointSlices = map[types.NamespacedName][]*discoveryv1.EndpointSlice{}
	for i := range obj.Spec.Services {
		t := &obj.Spec.Services[i]
		if t.Name == "" {
			continue
		}
		key := types.NamespacedName{Namespace: t.Namespace, Name: t.Name}
		if _, done := c.Services[key]; done {
			continue
		}
		var svc corev1.Service
		if err := reader.Get(ctx, key, &svc); err != nil {
			if client.IgnoreNotFound(err) != nil {
				return c, err
			}
			continue
		}
		c.Services[key] = &svc
		endpointSlices, err := EndpointSlicesOf(ctx, reader, key)
		if err != nil {
			return c, err
		}
		c.EndpointSlices[key] = endpointSlices
		for _, s := range endpointSlices {
			if err := ReadGated(ctx, reader, s, &c.Gated); err != nil {
				return c, err
			}
		}
	}
	return c, nil
}

// readNodes reads into c the nodes obj's desired state depends on: only
// those the selector matches, filtered before they are copied out of the
// cache (at 5,000 nodes, copying and scanning them all took most of a
// reconcile's CPU besides OCI's). An invalid selector lists them all, for
// desired.Compute to report it. Pod targets need every node, by name: an
// endpoint's node says whether its address is reachable.
func readNodes(ctx context.Context, reader client.Reader, obj *v1beta1.LBRegistrar, c *desired.Cluster) error {
	var nodes corev1.NodeList
	opts := []client.ListOption{client.UnsafeDisableDeepCopy}
	pods := slices.ContainsFunc(obj.Spec.Services, func(t v1beta1.Target) bool { return t.Pods() })
	if obj.Spec.NodeSelector != nil && !pods {
		if sel, err := metav1.LabelSelectorAsSelector(obj.Spec.NodeSelector); err == nil {
			opts = append(opts, client.MatchingLabelsSelector{Selector: sel})
		}
	}
	if err := reader.List(ctx, &nodes, opts...); err != nil {
		return err
	}
	c.Nodes = make([]*corev1.Node, len(nodes.Items))
	for i := range nodes.Items {
		c.Nodes[i] = &nodes.Items[i]
	}
	if pods {
		c.NodesByName = make(map[string]*corev1.Node, len(c.Nodes))
		for _, n := range c.Nodes {
			c.NodesByName[n.Name] = n
		}
	}
	return nil
}

// EndpointSlicesOf are the EndpointSlices of a Service, read in place (as
// the cache stores them: never to be changed).
func EndpointSlicesOf(ctx context.Context, reader client.Reader, service types.NamespacedName) ([]*discoveryv1.EndpointSlice, error) {
	var list discoveryv1.EndpointSliceList
	if err := reader.List(ctx, &list, client.InNamespace(service.Namespace),
		client.MatchingLabels{discoveryv1.LabelServiceName: service.Name}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	out := make([]*discoveryv1.EndpointSlice, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}

// ReadGated adds to gated the pods of slice's endpoints that a readiness
// gate may be keeping waiting (desired.WaitingPod): only the pods that carry
// lbregistrar's are cached, so the others are not found.
func ReadGated(ctx context.Context, reader client.Reader, slice *discoveryv1.EndpointSlice, gated *desired.GatedPods) error {
	for k := range slice.Endpoints {
		key, waiting := desired.WaitingPod(&slice.Endpoints[k])
		if _, done := (*gated)[key]; !waiting || done {
			continue
		}
		var pod corev1.Pod
		if err := reader.Get(ctx, key, &pod, client.UnsafeDisableDeepCopy); err != nil {
			if client.IgnoreNotFound(err) != nil {
				return err
			}
			continue
		}
		if *gated == nil {
			*gated = desired.GatedPods{}
		}
		(*gated)[key] = &pod
	}
	return nil
}
