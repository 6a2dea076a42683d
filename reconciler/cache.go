package reconciler

import (
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/reconciler/desired"
)

// CacheOptions are the manager's cache options: the nodes, Services and
// EndpointSlices the controller watches are cached with only what the
// desired state reads (desired.TrimNode and friends), and every other
// object without its managed fields, so memory follows the size of the
// cluster's topology rather than of its objects (a node's images and
// conditions, kubectl's last-applied annotations).
func CacheOptions() cache.Options {
	return cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Node{}:               {Transform: trimming(desired.TrimNode)},
			&corev1.Service{}:            {Transform: trimming(desired.TrimService)},
			&discoveryv1.EndpointSlice{}: {Transform: trimming(desired.TrimEndpointSlice)},
			// Only the pods that carry lbregistrar's readiness gate.
			&corev1.Pod{}: {Label: gatedPods, Transform: trimming(desired.TrimPod)},
		},
	}
}

// gatedPods selects the pods the admission webhook gave the readiness gate.
var gatedPods = labels.SelectorFromSet(labels.Set{v1beta1.ReadinessGateLabel: ""})

// trimming applies trim to the objects of its type; anything else (a
// deletion tombstone) passes unchanged.
func trimming[T any](trim func(T) T) toolscache.TransformFunc {
	return func(in any) (any, error) {
		if obj, ok := in.(T); ok {
			return trim(obj), nil
		}
		return in, nil
	}
}
