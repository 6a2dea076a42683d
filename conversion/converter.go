// Package conversion serves the CRD's conversion webhook: controller-runtime's
// hub-and-spoke converter over the pure conversion functions of api/v1alpha1
// (ToHub, FromHub), the handler that answers ConversionReviews with it
// (NewHandler), and the path the API server calls.
package conversion

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	crconversion "sigs.k8s.io/controller-runtime/pkg/webhook/conversion"

	"github.com/peppy-ratio/lbregistrar/api/v1alpha1"
	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
)

// Path is where the API server calls the conversion webhook; config/ and the
// tests point at it.
const Path = "/convert"

// NewConverter builds controller-runtime's hub-and-spoke converter for
// LBRegistrar from v1alpha1.ToHub and v1alpha1.FromHub, which never fail.
func NewConverter(scheme *runtime.Scheme) (crconversion.Converter, error) {
	return crconversion.NewHubSpokeConverter(&v1beta1.LBRegistrar{},
		crconversion.NewSpokeConverter(&v1alpha1.LBRegistrar{},
			func(_ context.Context, hub *v1beta1.LBRegistrar, spoke *v1alpha1.LBRegistrar) error {
				v1alpha1.FromHub(hub, spoke)
				return nil
			},
			func(_ context.Context, spoke *v1alpha1.LBRegistrar, hub *v1beta1.LBRegistrar) error {
				v1alpha1.ToHub(spoke, hub)
				return nil
			},
		),
	)(scheme)
}

// Register serves the conversion webhook at Path on the manager's webhook
// server.
func Register(mgr manager.Manager) error {
	converter, err := NewConverter(mgr.GetScheme())
	if err != nil {
		return err
	}
	mgr.GetWebhookServer().Register(Path, NewHandler(mgr.GetScheme(), converter))
	return nil
}
