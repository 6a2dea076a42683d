package reconciler

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peppy-ratio/lbregistrar/reconciler/readiness"
)

// SetGate writes pod's gate condition as the gates controller does.
func SetGate(ctx context.Context, c client.Client, pod *corev1.Pod, v readiness.Verdict) error {
	_, _, err := setGate(ctx, c, pod, v)
	return err
}
