package webhook

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/peppy-ratio/lbregistrar/api/v1alpha1"
	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/api/validation"
	"github.com/peppy-ratio/lbregistrar/conversion"
)

// NewV1beta1Validator is the admission webhook for v1beta1 LBRegistrars.
// claims reads the resources that hold a claim, through the
// validation.ClaimIndexField index (the manager's cache in production).
//
// No defaulting webhook exists: v1alpha1 gets its defaults from the CRD and
// conversion.NormalizeSpec, and v1beta1 states every value on purpose.
func NewV1beta1Validator(scheme *runtime.Scheme, claims client.Reader) *admission.Webhook {
	return admission.WithValidator(scheme, &hubValidator{claims: claims})
}

// NewV1alpha1Validator is the admission webhook for v1alpha1 LBRegistrars:
// the same rules over the normalized spec, with errors on v1alpha1 fields.
func NewV1alpha1Validator(scheme *runtime.Scheme, claims client.Reader) *admission.Webhook {
	return admission.WithValidator(scheme, &alphaValidator{claims: claims})
}

type hubValidator struct{ claims client.Reader }

func (v *hubValidator) ValidateCreate(ctx context.Context, obj *v1beta1.LBRegistrar) (admission.Warnings, error) {
	errs, warnings := validation.ValidateCreate(obj)
	claimants, err := listClaimants(ctx, v.claims, &obj.Spec)
	if err != nil {
		return warnings, err
	}
	errs = append(errs, validation.ValidateClaims(obj, claimants)...)
	return verdict(v1beta1.GroupVersion.Version, obj.Name, errs, warnings)
}

func (v *hubValidator) ValidateUpdate(ctx context.Context, old, obj *v1beta1.LBRegistrar) (admission.Warnings, error) {
	errs, warnings := validation.ValidateUpdate(obj, old)
	claimants, err := listClaimants(ctx, v.claims, &obj.Spec)
	if err != nil {
		return warnings, err
	}
	claimErrs, claimWarnings := validation.Ratchet(validation.ValidateClaims(obj, claimants), validation.ValidateClaims(old, claimants))
	return verdict(v1beta1.GroupVersion.Version, obj.Name, append(errs, claimErrs...), append(warnings, claimWarnings...))
}

// ValidateDelete allows every delete: the reconciler's finalizer deregisters
// what the resource registered, whatever its spec says.
func (*hubValidator) ValidateDelete(context.Context, *v1beta1.LBRegistrar) (admission.Warnings, error) {
	return nil, nil
}

type alphaValidator struct{ claims client.Reader }

func (v *alphaValidator) ValidateCreate(ctx context.Context, obj *v1alpha1.LBRegistrar) (admission.Warnings, error) {
	errs, warnings := validation.ValidateV1alpha1Create(obj)
	hub := conversion.NormalizeSpec(&obj.Spec)
	claimants, err := listClaimants(ctx, v.claims, &hub)
	if err != nil {
		return warnings, err
	}
	errs = append(errs, validation.ValidateV1alpha1Claims(obj, claimants)...)
	return verdict(v1alpha1.GroupVersion.Version, obj.Name, errs, warnings)
}

func (v *alphaValidator) ValidateUpdate(ctx context.Context, old, obj *v1alpha1.LBRegistrar) (admission.Warnings, error) {
	errs, warnings := validation.ValidateV1alpha1Update(obj, old)
	hub := conversion.NormalizeSpec(&obj.Spec)
	claimants, err := listClaimants(ctx, v.claims, &hub)
	if err != nil {
		return warnings, err
	}
	claimErrs, claimWarnings := validation.Ratchet(validation.ValidateV1alpha1Claims(obj, claimants), validation.ValidateV1alpha1Claims(old, claimants))
	return verdict(v1alpha1.GroupVersion.Version, obj.Name, append(errs, claimErrs...), append(warnings, claimWarnings...))
}

// ValidateDelete allows every delete, as for v1beta1.
func (*alphaValidator) ValidateDelete(context.Context, *v1alpha1.LBRegistrar) (admission.Warnings, error) {
	return nil, nil
}

// listClaimants returns the resources that claim any (load balancer, backend
// set) of spec, each once. It costs one index lookup per backend set of spec,
// whatever the number of LBRegistrars.
func listClaimants(ctx context.Context, claims client.Reader, spec *v1beta1.LBRegistrarSpec) ([]v1beta1.LBRegistrar, error) {
	var claimants []v1beta1.LBRegistrar
	seen := map[string]bool{}
	for _, key := range validation.ClaimKeys(spec) {
		var list v1beta1.LBRegistrarList
		if err := claims.List(ctx, &list, client.MatchingFields{validation.ClaimIndexField: key}); err != nil {
			return nil, apierrors.NewInternalError(fmt.Errorf("reading the LBRegistrars that claim %s: %w", key, err))
		}
		for _, item := range list.Items {
			if !seen[item.Name] {
				seen[item.Name] = true
				claimants = append(claimants, item)
			}
		}
	}
	return claimants, nil
}

// verdict counts each broken rule once and turns errs into one Invalid status
// that lists every cause, which the API server returns to the client as is.
func verdict(version, name string, errs field.ErrorList, warnings []string) (admission.Warnings, error) {
	if len(errs) == 0 {
		return warnings, nil
	}
	counted := map[string]bool{}
	for _, e := range errs {
		if !counted[e.Origin] {
			counted[e.Origin] = true
			validationFailures.WithLabelValues(version, e.Origin).Inc()
		}
	}
	return warnings, apierrors.NewInvalid(v1beta1.GroupVersion.WithKind("LBRegistrar").GroupKind(), name, errs)
}
