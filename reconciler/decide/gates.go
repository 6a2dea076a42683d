package decide

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/reconciler/desired"
)

// Gates are the entries that gate pod (desired.Gating), read through
// reader: the Services of its namespace, and every LBRegistrar. The
// admission webhook, the gates controller and the watch of gated pods all
// ask here.
func Gates(ctx context.Context, reader client.Reader, pod *corev1.Pod) ([]desired.Gate, error) {
	var services corev1.ServiceList
	if err := reader.List(ctx, &services, client.InNamespace(pod.Namespace), client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	var selecting []*corev1.Service
	for i := range services.Items {
		if desired.Selects(&services.Items[i], pod) {
			selecting = append(selecting, &services.Items[i])
		}
	}
	if len(selecting) == 0 {
		return nil, nil
	}
	var list v1beta1.LBRegistrarList
	if err := reader.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	registrars := make([]*v1beta1.LBRegistrar, len(list.Items))
	for i := range list.Items {
		registrars[i] = &list.Items[i]
	}
	return desired.Gating(pod, selecting, registrars), nil
}
