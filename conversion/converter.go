package conversion

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"
	crconversion "sigs.k8s.io/controller-runtime/pkg/webhook/conversion"

	"github.com/peppy-ratio/lbregistrar/api/v1alpha1"
	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
)

// NewConverter builds controller-runtime's hub-and-spoke converter for
// LBRegistrar from ToHub and FromHub; register it with the webhook's
// converter registry. Keeping the functions here rather than as methods on
// the API types lets this package import both versions without a cycle.
func NewConverter(scheme *runtime.Scheme) (crconversion.Converter, error) {
	return crconversion.NewHubSpokeConverter(&v1beta1.LBRegistrar{},
		crconversion.NewSpokeConverter(&v1alpha1.LBRegistrar{},
			func(_ context.Context, hub *v1beta1.LBRegistrar, spoke *v1alpha1.LBRegistrar) error {
				FromHub(hub, spoke)
				return nil
			},
			func(_ context.Context, spoke *v1alpha1.LBRegistrar, hub *v1beta1.LBRegistrar) error {
				ToHub(spoke, hub)
				return nil
			},
		),
	)(scheme)
}
