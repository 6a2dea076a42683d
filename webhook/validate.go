package webhook

import (
	"context"
	"errors"
	"fmt"
	"net/http"

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
	"github.com/peppy-ratio/lbregistrar/index"
)

// NewV1beta1Validator is the admission webhook for v1beta1 LBRegistrars.
// claims reads the resources that make a claim, through the
// claim index of package index (the manager's cache in production).
//
// No defaulting webhook exists: v1alpha1 gets its defaults from the CRD and
// v1alpha1.NormalizeSpec, and v1beta1 states every value on purpose.
//
// controller is the username the controller runs and writes status as:
// only it may change an ownership record (see statusWrite), and its
// ServiceAccount is the controller's own identity (IdentityPolicy).
func NewV1beta1Validator(claims client.Reader, identities IdentityPolicy, controller string) *admission.Webhook {
	identities.Controller = controller
	return &admission.Webhook{Handler: &validator[*v1beta1.LBRegistrar, *v1beta1.LBRegistrar]{claims: claims, identities: identities, controller: controller, rules: hubRules}}
}

// NewV1alpha1Validator is the admission webhook for v1alpha1 LBRegistrars:
// the same rules over the spec as it will be stored, with errors on the
// v1alpha1 fields that wrote it.
func NewV1alpha1Validator(claims client.Reader, identities IdentityPolicy, controller string) *admission.Webhook {
	identities.Controller = controller
	return &admission.Webhook{Handler: &validator[*v1alpha1.LBRegistrar, *validation.Alpha]{claims: claims, identities: identities, controller: controller, rules: alphaRules}}
}

// rules are one API version's side of validation: its empty object, the
// form validation reads it in (V, converted once per object), its create,
// update and claim checks, and the spec as stored, whose claims are looked up
// and whose Secrets are checked.
type rules[T client.Object, V any] struct {
	version   string
	newObject func() T
	view      func(obj T) V
	// validate checks a create (old nil) or an update against claimants.
	validate func(obj, old V, claimants []v1beta1.LBRegistrar) (field.ErrorList, []string)
	stored   func(V) *v1beta1.LBRegistrarSpec
	// services are the Services the stored spec names, on the fields the
	// version wrote them in.
	services func(V) []validation.ServiceReference
	// status is the status as stored.
	status func(T) v1beta1.LBRegistrarStatus
}

var hubRules = rules[*v1beta1.LBRegistrar, *v1beta1.LBRegistrar]{
	version: v1beta1.GroupVersion.Version,
	newObject: func() *v1beta1.LBRegistrar {
		return &v1beta1.LBRegistrar{TypeMeta: metav1.TypeMeta{APIVersion: v1beta1.GroupVersion.String()}}
	},
	view:     func(obj *v1beta1.LBRegistrar) *v1beta1.LBRegistrar { return obj },
	validate: validation.ValidateWrite,
	stored:   func(obj *v1beta1.LBRegistrar) *v1beta1.LBRegistrarSpec { return &obj.Spec },
	services: func(obj *v1beta1.LBRegistrar) []validation.ServiceReference {
		return validation.ServiceReferences(&obj.Spec)
	},
	status: func(obj *v1beta1.LBRegistrar) v1beta1.LBRegistrarStatus { return obj.Status },
}

var alphaRules = rules[*v1alpha1.LBRegistrar, *validation.Alpha]{
	version: v1alpha1.GroupVersion.Version,
	newObject: func() *v1alpha1.LBRegistrar {
		return &v1alpha1.LBRegistrar{TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String()}}
	},
	view:     validation.NewAlpha,
	validate: validation.ValidateV1alpha1Write,
	stored:   func(a *validation.Alpha) *v1beta1.LBRegistrarSpec { return &a.Stored },
	services: (*validation.Alpha).ServiceReferences,
	status: func(obj *v1alpha1.LBRegistrar) v1beta1.LBRegistrarStatus {
		var hub v1beta1.LBRegistrar
		v1alpha1.ToHub(obj, &hub)
		return hub.Status
	},
}

// validator checks creates and updates. Deletes are allowed whatever the
// spec says, since the reconciler's finalizer deregisters what the resource
// registered; CONNECT does not apply to LBRegistrars.
type validator[T client.Object, V any] struct {
	claims     client.Reader
	identities IdentityPolicy
	controller string
	rules      rules[T, V]
}

func (v *validator[T, V]) Handle(ctx context.Context, req admission.Request) admission.Response {
	obj := v.rules.newObject()
	var view, oldView V          // oldView stays nil on create: V is a pointer type
	var stored map[string]string // the annotations the write replaces
	var refused field.ErrorList
	switch req.Operation {
	case admissionv1.Create:
		if err := decode(req.Object, obj); err != nil {
			return admission.Errored(http.StatusBadRequest, err)
		}
		refused = refuseConversionAnnotations(obj, nil)
		view = v.rules.view(obj)
	case admissionv1.Update:
		old := v.rules.newObject()
		if err := decodeUpdate(req, obj, old); err != nil {
			return admission.Errored(http.StatusBadRequest, err)
		}
		stored = old.GetAnnotations()
		refused = refuseConversionAnnotations(obj, stored)
		if req.SubResource == "status" {
			if len(refused) > 0 {
				return verdict(v.rules.version, req.Name, refused, nil)
			}
			return v.statusWrite(req, v.rules.status(obj), v.rules.status(old))
		}
		view, oldView = v.rules.view(obj), v.rules.view(old)
	case admissionv1.Delete, admissionv1.Connect:
		return admission.Allowed("")
	default:
		return unknownOperation(req)
	}
	spec := v.rules.stored(view)
	claimants, err := index.ClaimingAny(ctx, v.claims, spec)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	errs, warnings := v.rules.validate(view, oldView, claimants)
	errs = append(refused, errs...)
	rights := rightsToReplace(obj.GetAnnotations(), stored)
	var oldServices []validation.ServiceReference
	if req.Operation == admissionv1.Update {
		oldServices = v.rules.services(oldView)
	}
	rights = append(rights, rightsToRegister(v.rules.services(view), oldServices)...)
	if req.Operation == admissionv1.Create || changesIdentity(spec, v.rules.stored(oldView), obj.GetAnnotations(), stored) {
		identityRights, identityErrs := v.identities.rightsFor(spec)
		rights, errs = append(rights, identityRights...), append(errs, identityErrs...)
	}
	accessErrs, err := v.identities.check(ctx, req.UserInfo, rights)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err).WithWarnings(warnings...)
	}
	return verdict(v.rules.version, obj.GetName(), append(errs, accessErrs...), warnings)
}

// changesIdentity reports whether an update may change what lbregistrar
// signs in with, or where: it changes the spec but for its switches
// (withoutSwitches), or it removes the mark of an identity no admission
// check saw (validation.UncheckedIdentity), which the controller then
// uses. A write that does neither (a finalizer, a label, a pause) is not
// asked about the identity.
func changesIdentity(spec, old *v1beta1.LBRegistrarSpec, annotations, stored map[string]string) bool {
	return !equality.Semantic.DeepEqual(withoutSwitches(spec), withoutSwitches(old)) ||
		validation.UncheckedIdentity(stored, old) != nil && validation.UncheckedIdentity(annotations, spec) == nil
}

// withoutSwitches is spec without what only says whether the controller
// writes, and what deleting the resource does: suspend and
// deletionPolicy. Setting them names nothing to sign in with, so whoever
// may update the resource may pause it, or have its deletion keep its
// backends, with no more rights than deleting it takes.
func withoutSwitches(spec *v1beta1.LBRegistrarSpec) *v1beta1.LBRegistrarSpec {
	out := *spec
	out.Suspend, out.DeletionPolicy = false, ""
	return &out
}

// statusWrite admits a write of the status subresource. The ownership
// record (status.loadBalancerId, status.backendSets and the signature
// over them) says which backends the controller may remove, so only the
// controller may change it; anyone else with access to the subresource
// (cluster tooling, backup and restore, the original operator writing its
// phase through v1alpha1) may change the rest.
func (v *validator[T, V]) statusWrite(req admission.Request, status, old v1beta1.LBRegistrarStatus) admission.Response {
	if req.UserInfo.Username == v.controller {
		return admission.Allowed("")
	}
	statusPath := field.NewPath("status")
	why := fmt.Sprintf("only the lbregistrar controller (%s) may change the ownership record", v.controller)
	var errs field.ErrorList
	if status.LoadBalancerID != old.LoadBalancerID {
		errs = append(errs, field.Forbidden(statusPath.Child("loadBalancerId"), why))
	}
	if !equality.Semantic.DeepEqual(status.BackendSets, old.BackendSets) {
		errs = append(errs, field.Forbidden(statusPath.Child("backendSets"), why))
	}
	if status.RecordSignature != old.RecordSignature {
		errs = append(errs, field.Forbidden(statusPath.Child("recordSignature"), why))
	}
	for i := range errs {
		errs[i] = errs[i].WithOrigin(validation.RuleOwnershipRecord)
	}
	return verdict(v.rules.version, req.Name, errs, nil)
}

// refuseConversionAnnotations refuses, without reading them, the
// compressed conversion annotations of obj that
// validation.ValidateConversionAnnotations refuses against the stored ones:
// the stored value is put back in obj in their place, so a forged value is
// never expanded and the rest of the write is checked as it would be
// stored. Plain values are left to validation, which reads them and checks
// what they hide too.
func refuseConversionAnnotations(obj client.Object, stored map[string]string) field.ErrorList {
	annotations := obj.GetAnnotations()
	var refused field.ErrorList
	for _, key := range v1alpha1.ConversionAnnotations {
		if v1alpha1.ExpandedSize(annotations, key) == 0 {
			continue
		}
		var was map[string]string // the stored value alone
		if value, ok := stored[key]; ok {
			was = map[string]string{key: value}
		}
		errs := validation.ValidateConversionAnnotations(map[string]string{key: annotations[key]}, was)
		if len(errs) == 0 {
			continue
		}
		refused = append(refused, errs...)
		if was != nil {
			annotations[key] = was[key]
		} else {
			delete(annotations, key)
		}
	}
	obj.SetAnnotations(annotations)
	return refused
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
