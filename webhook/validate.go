package webhook

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	kjson "sigs.k8s.io/json"

	"github.com/peppy-ratio/lbregistrar/api/v1alpha1"
	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/api/validation"
)

// NewV1beta1Validator is the admission webhook for v1beta1 LBRegistrars.
// claims reads the resources that hold a claim, through the
// validation.ClaimIndexField index (the manager's cache in production).
//
// No defaulting webhook exists: v1alpha1 gets its defaults from the CRD and
// conversion.NormalizeSpec, and v1beta1 states every value on purpose.
func NewV1beta1Validator(claims client.Reader, secrets SecretPolicy) *admission.Webhook {
	return &admission.Webhook{Handler: &validator[*v1beta1.LBRegistrar]{claims: claims, secrets: secrets, rules: hubRules}}
}

// NewV1alpha1Validator is the admission webhook for v1alpha1 LBRegistrars:
// the same rules over the normalized spec, with errors on v1alpha1 fields.
func NewV1alpha1Validator(claims client.Reader, secrets SecretPolicy) *admission.Webhook {
	return &admission.Webhook{Handler: &validator[*v1alpha1.LBRegistrar]{claims: claims, secrets: secrets, rules: alphaRules}}
}

// rules are one API version's side of validation: its empty object, its
// create, update and claim checks, and the hub spec whose claims are looked
// up.
type rules[T client.Object] struct {
	version   string
	newObject func() T
	create    func(obj T) (field.ErrorList, []string)
	update    func(obj, old T) (field.ErrorList, []string)
	claims    func(obj T, claimants []v1beta1.LBRegistrar) field.ErrorList
	hubSpec   func(obj T) *v1beta1.LBRegistrarSpec
}

var hubRules = rules[*v1beta1.LBRegistrar]{
	version: v1beta1.GroupVersion.Version,
	newObject: func() *v1beta1.LBRegistrar {
		return &v1beta1.LBRegistrar{TypeMeta: metav1.TypeMeta{APIVersion: v1beta1.GroupVersion.String()}}
	},
	create:  validation.ValidateCreate,
	update:  validation.ValidateUpdate,
	claims:  validation.ValidateClaims,
	hubSpec: func(obj *v1beta1.LBRegistrar) *v1beta1.LBRegistrarSpec { return &obj.Spec },
}

var alphaRules = rules[*v1alpha1.LBRegistrar]{
	version: v1alpha1.GroupVersion.Version,
	newObject: func() *v1alpha1.LBRegistrar {
		return &v1alpha1.LBRegistrar{TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String()}}
	},
	create: validation.ValidateV1alpha1Create,
	update: validation.ValidateV1alpha1Update,
	claims: validation.ValidateV1alpha1Claims,
	hubSpec: func(obj *v1alpha1.LBRegistrar) *v1beta1.LBRegistrarSpec {
		stored := validation.StoredSpec(obj)
		return &stored
	},
}

// validator checks creates and updates. Deletes are allowed whatever the
// spec says, since the reconciler's finalizer deregisters what the resource
// registered; CONNECT does not apply to LBRegistrars.
type validator[T client.Object] struct {
	claims  client.Reader
	secrets SecretPolicy
	rules   rules[T]
}

func (v *validator[T]) Handle(ctx context.Context, req admission.Request) admission.Response {
	obj := v.rules.newObject()
	switch req.Operation {
	case admissionv1.Create:
		if err := decode(req.Object, obj); err != nil {
			return admission.Errored(http.StatusBadRequest, err)
		}
		errs, warnings := v.rules.create(obj)
		spec := v.rules.hubSpec(obj)
		claimants, err := listClaimants(ctx, v.claims, spec)
		if err != nil {
			return admission.Errored(http.StatusInternalServerError, err).WithWarnings(warnings...)
		}
		errs = append(errs, v.rules.claims(obj, claimants)...)
		secretErrs, err := v.secrets.check(ctx, req.UserInfo, spec)
		if err != nil {
			return admission.Errored(http.StatusInternalServerError, err).WithWarnings(warnings...)
		}
		return verdict(v.rules.version, obj.GetName(), append(errs, secretErrs...), warnings)
	case admissionv1.Update:
		old := v.rules.newObject()
		if err := decodeUpdate(req, obj, old); err != nil {
			return admission.Errored(http.StatusBadRequest, err)
		}
		errs, warnings := v.rules.update(obj, old)
		spec := v.rules.hubSpec(obj)
		claimants, err := listClaimants(ctx, v.claims, spec)
		if err != nil {
			return admission.Errored(http.StatusInternalServerError, err).WithWarnings(warnings...)
		}
		claimErrs, claimWarnings := validation.Ratchet(v.rules.claims(obj, claimants), v.rules.claims(old, claimants))
		errs, warnings = append(errs, claimErrs...), append(warnings, claimWarnings...)
		// A write that leaves the spec alone (a finalizer, a label) changes
		// nothing lbregistrar signs or where.
		if !equality.Semantic.DeepEqual(spec, v.rules.hubSpec(old)) {
			secretErrs, err := v.secrets.check(ctx, req.UserInfo, spec)
			if err != nil {
				return admission.Errored(http.StatusInternalServerError, err).WithWarnings(warnings...)
			}
			errs = append(errs, secretErrs...)
		}
		return verdict(v.rules.version, obj.GetName(), errs, warnings)
	case admissionv1.Delete, admissionv1.Connect:
		return admission.Allowed("")
	}
	return unknownOperation(req)
}

func unknownOperation(req admission.Request) admission.Response {
	return admission.Errored(http.StatusBadRequest, fmt.Errorf("unknown operation %q", req.Operation))
}

// decode reads an object of the handler's version in one pass. The API
// server has already pruned unknown fields, so no scheme lookup or strict
// check is needed; field names are matched case-sensitively, as it does.
func decode(raw runtime.RawExtension, into runtime.Object) error {
	if len(raw.Raw) == 0 {
		return errors.New("the request carries no object")
	}
	want := into.GetObjectKind().GroupVersionKind().GroupVersion()
	if err := kjson.UnmarshalCaseSensitivePreserveInts(raw.Raw, into); err != nil {
		return fmt.Errorf("decoding the object: %w", err)
	}
	// matchPolicy Exact sends each handler its own version only.
	if got := into.GetObjectKind().GroupVersionKind(); got.GroupVersion() != want || got.Kind != "LBRegistrar" {
		return fmt.Errorf("this webhook admits %s LBRegistrar, not %s %s", want, got.GroupVersion(), got.Kind)
	}
	return nil
}

func decodeUpdate(req admission.Request, obj, old runtime.Object) error {
	if err := decode(req.Object, obj); err != nil {
		return err
	}
	if err := decode(req.OldObject, old); err != nil {
		return fmt.Errorf("old object: %w", err)
	}
	return nil
}

// listClaimants returns the resources that claim any (load balancer, backend
// set) of spec, each once. It costs one index lookup per backend set of spec,
// whatever the number of LBRegistrars.
func listClaimants(ctx context.Context, claims client.Reader, spec *v1beta1.LBRegistrarSpec) ([]v1beta1.LBRegistrar, error) {
	var claimants []v1beta1.LBRegistrar
	for _, key := range validation.ClaimKeys(spec) {
		var list v1beta1.LBRegistrarList
		if err := claims.List(ctx, &list, client.MatchingFields{validation.ClaimIndexField: key}); err != nil {
			return nil, fmt.Errorf("reading the LBRegistrars that claim %s: %w", key, err)
		}
		for _, item := range list.Items {
			if !slices.ContainsFunc(claimants, func(c v1beta1.LBRegistrar) bool { return c.Name == item.Name }) {
				claimants = append(claimants, item)
			}
		}
	}
	return claimants, nil
}

// verdict counts each broken rule once and answers with one Invalid status
// that lists every cause, which the API server returns to the client as is.
func verdict(version, name string, errs field.ErrorList, warnings []string) admission.Response {
	if len(errs) == 0 {
		return admission.Allowed("").WithWarnings(warnings...)
	}
	counted := map[string]bool{}
	for _, e := range errs {
		if !counted[e.Origin] {
			counted[e.Origin] = true
			validationFailures.WithLabelValues(version, e.Origin).Inc()
		}
	}
	status := apierrors.NewInvalid(v1beta1.GroupVersion.WithKind("LBRegistrar").GroupKind(), name, errs).Status()
	return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Allowed: false, Result: &status}}.WithWarnings(warnings...)
}
