package decide

import (
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/index"
	"github.com/peppy-ratio/lbregistrar/reconciler/desired"
)

// Gates are the targets that gate pod (desired.Gating), read through
// reader: the Services of its namespace that select it (as the
// EndpointSlice controller finds a pod's Services: every Service of the
// namespace, its selector matched), and the LBRegistrars that name one of
// them, one index lookup per Service (index.Naming), never a scan of
// every resource. The admission webhook, the gates controller and the
// watch of gated pods all ask here.
func Gates(ctx context.Context, reader client.Reader, pod *corev1.Pod) ([]desired.Gate, error) {
	var services corev1.ServiceList
	if err := reader.List(ctx, &services, client.InNamespace(pod.Namespace), client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	var selecting []*corev1.Service
	var registrars []*v1beta1.LBRegistrar
	for i := range services.Items {
		svc := &services.Items[i]
		if !desired.Selects(svc, pod) {
			continue
		}
		selecting = append(selecting, svc)
		naming, err := index.Naming(ctx, reader, types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name})
		if err != nil {
			return nil, err
		}
		for j := range naming {
			if !slices.ContainsFunc(registrars, func(r *v1beta1.LBRegistrar) bool { return r.Name == naming[j].Name }) {
				registrars = append(registrars, &naming[j])
			}
		}
	}
	if len(registrars) == 0 {
		return nil, nil
	}
	return desired.Gating(pod, selecting, registrars), nil
}
