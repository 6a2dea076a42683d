package validation

import (
	"fmt"
	"reflect"
	"slices"

	"k8s.io/apimachinery/pkg/api/equality"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/peppy-ratio/lbregistrar/api/v1alpha1"
	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
)

var specPath = field.NewPath("spec")

// hubDataSpecPath is where the spec values a v1alpha1 object cannot show
// come from: its conversion annotation.
var hubDataSpecPath = field.NewPath("metadata", "annotations").Key(v1alpha1.HubDataAnnotation).Child("spec")

// ValidateWrite checks a v1beta1 LBRegistrar being created (old nil) or
// replacing old, against the resources claimants that claim its backend
// sets: what admission and lbregistrar validate run.
func ValidateWrite(obj, old *v1beta1.LBRegistrar, claimants []v1beta1.LBRegistrar) (field.ErrorList, []string) {
	return validateWrite(ValidateCreate, ValidateUpdate, ValidateClaims, obj, old, old != nil, claimants)
}

// ValidateV1alpha1Write is ValidateWrite for a v1alpha1 LBRegistrar.
func ValidateV1alpha1Write(obj, old *Alpha, claimants []v1beta1.LBRegistrar) (field.ErrorList, []string) {
	return validateWrite(ValidateV1alpha1Create, ValidateV1alpha1Update, ValidateV1alpha1Claims, obj, old, old != nil, claimants)
}

// validateWrite runs one version's create or update rules and its claim
// rule, ratcheted on update like the others.
func validateWrite[V any](create func(V) (field.ErrorList, []string), update func(obj, old V) (field.ErrorList, []string),
	claims func(V, []v1beta1.LBRegistrar) field.ErrorList, obj, old V, isUpdate bool, claimants []v1beta1.LBRegistrar) (field.ErrorList, []string) {
	if !isUpdate {
		errs, warnings := create(obj)
		return append(errs, claims(obj, claimants)...), warnings
	}
	errs, warnings := update(obj, old)
	claimErrs, claimWarnings := Ratchet(claims(obj, claimants), claims(old, claimants))
	return append(errs, claimErrs...), append(warnings, claimWarnings...)
}

// ValidateCreate checks a new v1beta1 LBRegistrar.
func ValidateCreate(obj *v1beta1.LBRegistrar) (field.ErrorList, []string) {
	errs := ValidateSpec(&obj.Spec, specPath)
	return append(errs, ValidateConversionAnnotations(obj.Annotations, nil)...), nil
}

// ValidateUpdate checks a v1beta1 LBRegistrar replacing old.
func ValidateUpdate(obj, old *v1beta1.LBRegistrar) (field.ErrorList, []string) {
	errs, warnings := Ratchet(ValidateSpec(&obj.Spec, specPath), ValidateSpec(&old.Spec, specPath))
	errs = append(errs, validateImmutable(&obj.Spec, &old.Spec)...)
	return append(errs, ValidateConversionAnnotations(obj.Annotations, old.Annotations)...), warnings
}

// ValidateConversionAnnotations refuses a write that adds or changes an
// annotation only conversion may write (package conversion): what one API
// version keeps of the other. Converting a v1alpha1 write takes the stored
// status, the record of which backends the resource registered, and spec
// values v1alpha1 cannot show from nodes.peppy-ratio.dev/v1beta1-data, so a
// forged value would let a write replace the status and slip values past
// every rule. stored are the annotations of the object the write replaces
// (nil on create): a value read from the API server and sent back unchanged,
// as kubectl edit and apply do, passes. Removing v1beta1-data is refused too,
// since conversion would then reset the status; removing v1alpha1-spec only
// changes which equivalent v1alpha1 form is shown, and removing
// unchecked-identity is checked as naming the identity (UncheckedIdentity).
func ValidateConversionAnnotations(annotations, stored map[string]string) field.ErrorList {
	var errs field.ErrorList
	for _, key := range v1alpha1.ConversionAnnotations {
		path := field.NewPath("metadata", "annotations").Key(key)
		value, has := annotations[key]
		was, had := stored[key]
		switch {
		case has && (!had || value != was):
			errs = append(errs, field.Forbidden(path,
				"written only by conversion, from the stored object: a write may send back the value read from the API server, or leave it out, but not set or change it").WithOrigin(RuleConversionAnnotation))
		case !has && had && key == v1alpha1.HubDataAnnotation:
			errs = append(errs, field.Forbidden(path,
				"removing it would reset the status (the record of the backends this resource registered) and the values v1alpha1 cannot show: send it back as read from the API server (kubectl edit and kubectl apply do)").WithOrigin(RuleConversionAnnotation))
		}
	}
	return errs
}

func validateImmutable(spec, old *v1beta1.LBRegistrarSpec) field.ErrorList {
	if spec.LoadBalancerID == old.LoadBalancerID {
		return nil
	}
	return field.ErrorList{field.Invalid(specPath.Child("loadBalancerId"), spec.LoadBalancerID,
		fmt.Sprintf("field is immutable (was %s): backends registered on the old load balancer would be left behind; create a new LBRegistrar for the other load balancer and delete this one", old.LoadBalancerID)).WithOrigin(RuleImmutable)}
}

// Alpha is a v1alpha1 object as validation reads it, converted once: the
// spec its own fields say (NormalizeSpec) and the spec the API server will
// store (ToHub, with what its conversion annotation keeps).
type Alpha struct {
	Object  *v1alpha1.LBRegistrar
	Visible v1beta1.LBRegistrarSpec
	Stored  v1beta1.LBRegistrarSpec
}

// NewAlpha converts obj for validation. The visible targets carry the
// types the conversion annotation keeps for them: a Service port's node
// port and endpoints in one backend set look alike in v1alpha1, yet are
// no duplicates.
func NewAlpha(obj *v1alpha1.LBRegistrar) *Alpha {
	var hub v1beta1.LBRegistrar
	v1alpha1.ToHub(obj, &hub)
	visible := v1alpha1.NormalizeSpec(&obj.Spec)
	v1alpha1.KeepTargetTypes(visible.Services, hub.Spec.Services)
	return &Alpha{Object: obj, Visible: visible, Stored: hub.Spec}
}

// hidden reports whether the stored spec has values the v1alpha1 fields do
// not show (from the conversion annotation).
func (a *Alpha) hidden() bool { return !equality.Semantic.DeepEqual(&a.Visible, &a.Stored) }

// paths says where the targets of the stored spec were written: in the
// v1alpha1 fields when they alone make it, else in the conversion annotation.
func (a *Alpha) paths() specPaths {
	if a.hidden() {
		return hubPaths(hubDataSpecPath)
	}
	return alphaPaths(&a.Object.Spec)
}

// ValidateV1alpha1Create checks a new v1alpha1 LBRegistrar: the rules of its
// normalized v1beta1 form, reported on the v1alpha1 fields, plus the rules
// about fields only v1alpha1 has. Deprecated fields give warnings.
//
// The object is checked as it will be stored: values its conversion
// annotation adds to the spec are checked too, and the annotation itself
// (ValidateConversionAnnotations).
func ValidateV1alpha1Create(a *Alpha) (field.ErrorList, []string) {
	errs := validateAlphaSpec(a)
	errs = append(errs, validateMixedTargets(&a.Object.Spec)...)
	errs = append(errs, ValidateConversionAnnotations(a.Object.Annotations, nil)...)
	return errs, deprecationWarnings(a)
}

// ValidateV1alpha1Update checks a v1alpha1 LBRegistrar replacing old. Mixing
// services with the single-service fields only warns here: the original
// operator accepted it, and such objects must stay editable.
func ValidateV1alpha1Update(a, old *Alpha) (field.ErrorList, []string) {
	errs, warnings := Ratchet(validateAlphaSpec(a), validateAlphaSpec(old))
	warnings = append(warnings, asWarnings(validateMixedTargets(&a.Object.Spec))...)
	errs = append(errs, validateImmutable(&a.Stored, &old.Stored)...)
	errs = append(errs, ValidateConversionAnnotations(a.Object.Annotations, old.Object.Annotations)...)
	return errs, append(warnings, deprecationWarnings(a)...)
}

// validateAlphaSpec runs the v1beta1 rules over the stored form of the
// spec, plus the range checks that normalization would hide (a negative
// weight becomes a fallback, an ignored one is never read). Values that only
// the conversion annotation contains are reported on it.
func validateAlphaSpec(a *Alpha) field.ErrorList {
	spec := &a.Object.Spec
	errs := validateSpec(&a.Visible, specPath, alphaPaths(spec))
	if a.hidden() {
		errs = append(errs, without(ValidateSpec(&a.Stored, hubDataSpecPath), errs)...)
	}
	errs = append(errs, nonNegative(spec.Port, specPath.Child("port"), RulePort)...)
	errs = append(errs, nonNegative(spec.NodePort, specPath.Child("nodePort"), RulePort)...)
	taken := takenWeights(a)
	for _, w := range alphaWeights(spec) {
		switch {
		case w.value < 0:
			errs = append(errs, nonNegative(w.value, w.path, RuleWeight)...)
		case w.value > maxWeight && !taken[w.path.String()]:
			// The target rules see only the weights a target takes; the
			// schema limits the others too.
			errs = append(errs, field.Invalid(w.path, w.value, utilvalidation.InclusiveRangeError(0, maxWeight)).WithOrigin(RuleWeight))
		}
	}
	return errs
}

// alphaWeight is one weight field of a v1alpha1 spec.
type alphaWeight struct {
	path  *field.Path
	value int
}

func alphaWeights(spec *v1alpha1.LBRegistrarSpec) []alphaWeight {
	weights := []alphaWeight{{specPath.Child("weight"), spec.Weight}}
	if spec.Service != nil {
		weights = append(weights, alphaWeight{specPath.Child("service", "weight"), spec.Service.Weight})
	}
	for i := range spec.Services {
		weights = append(weights, alphaWeight{specPath.Child("services").Index(i).Child("weight"), spec.Services[i].Weight})
	}
	return weights
}

// takenWeights are the paths of the weight fields some target of the
// v1alpha1 fields registers with.
func takenWeights(a *Alpha) map[string]bool {
	paths := alphaPaths(&a.Object.Spec)
	taken := map[string]bool{}
	for i := range a.Visible.Services {
		taken[paths.target(i).weight.String()] = true
	}
	return taken
}

// without returns the errors of errs that break no rule already reported in
// reported, on any field: the stored spec repeats what the v1alpha1 fields
// already showed.
func without(errs, reported field.ErrorList) field.ErrorList {
	var out field.ErrorList
	for _, e := range errs {
		if !slices.ContainsFunc(reported, func(r *field.Error) bool {
			return r.Type == e.Type && r.Origin == e.Origin && r.Detail == e.Detail && reflect.DeepEqual(r.BadValue, e.BadValue)
		}) {
			out = append(out, e)
		}
	}
	return out
}

func nonNegative(v int, fldPath *field.Path, rule string) field.ErrorList {
	if v >= 0 {
		return nil
	}
	return field.ErrorList{field.Invalid(fldPath, v, "must not be negative").WithOrigin(rule)}
}

// alphaPaths maps the targets of v1alpha1.NormalizeSpec(spec) back to the
// v1alpha1 fields they came from, following the same precedence.
func alphaPaths(spec *v1alpha1.LBRegistrarSpec) specPaths {
	paths := specPaths{targets: specPath.Child("services")}
	switch {
	case len(spec.Services) > 0:
		paths.target = func(i int) targetPaths {
			p := itemPaths(specPath.Child("services").Index(i))
			if spec.Services[i].BackendSetName == "" {
				p.backendSetName = specPath.Child("backendSetName")
			}
			if spec.Services[i].Weight <= 0 {
				p.weight = specPath.Child("weight")
			}
			return p
		}
	case spec.Service != nil:
		paths.target = func(int) targetPaths {
			p := itemPaths(specPath.Child("service"))
			if spec.BackendSetName != "" || spec.Service.BackendSetName == "" {
				p.backendSetName = specPath.Child("backendSetName")
			}
			if spec.Weight > 0 || spec.Service.Weight <= 0 {
				p.weight = specPath.Child("weight")
			}
			return p
		}
	default:
		port := specPath.Child("nodePort")
		if spec.Port > 0 {
			port = specPath.Child("port")
		}
		paths.target = func(int) targetPaths {
			return targetPaths{
				item:           port,
				nodePort:       port,
				backendSetName: specPath.Child("backendSetName"),
				weight:         specPath.Child("weight"),
			}
		}
	}
	return paths
}

// validateMixedTargets reports v1alpha1 specs whose services list makes
// service, nodePort and port silently ignored.
func validateMixedTargets(spec *v1alpha1.LBRegistrarSpec) field.ErrorList {
	if len(spec.Services) == 0 {
		return nil
	}
	var errs field.ErrorList
	const detail = "ignored because spec.services is set; remove it or move it into spec.services"
	if spec.Service != nil {
		errs = append(errs, field.Forbidden(specPath.Child("service"), detail).WithOrigin(RuleMixedTargets))
	}
	if spec.NodePort != 0 {
		errs = append(errs, field.Forbidden(specPath.Child("nodePort"), detail).WithOrigin(RuleMixedTargets))
	}
	if spec.Port != 0 {
		errs = append(errs, field.Forbidden(specPath.Child("port"), detail).WithOrigin(RuleMixedTargets))
	}
	return errs
}

// deprecationWarnings names the replacement of every deprecated v1alpha1
// field the spec uses, and the fields a single service ignores. A weight at
// its schema default (1) is not reported: every stored object has it.
func deprecationWarnings(a *Alpha) []string {
	spec := &a.Object.Spec
	var warnings []string
	warn := func(format string, args ...any) { warnings = append(warnings, fmt.Sprintf(format, args...)) }
	if spec.Service != nil {
		warn("spec.service is deprecated: use spec.services")
	}
	if s := spec.Service; s != nil && len(spec.Services) == 0 && len(a.Visible.Services) == 1 {
		used := a.Visible.Services[0]
		if s.BackendSetName != "" && s.BackendSetName != used.BackendSetName {
			warn("spec.service.backendSetName (%q) is ignored: a single service registers in spec.backendSetName (%q), as the original operator did", s.BackendSetName, used.BackendSetName)
		}
		if s.Weight > 1 && s.Weight != int(used.Weight) {
			warn("spec.service.weight (%d) is ignored: a single service registers with spec.weight (%d), as the original operator did", s.Weight, used.Weight)
		}
	}
	if spec.NodePort != 0 {
		warn("spec.nodePort is deprecated: use spec.services[].nodePort in nodes.peppy-ratio.dev/v1beta1")
	}
	if spec.Port != 0 {
		warn("spec.port is deprecated: use spec.services[].nodePort in nodes.peppy-ratio.dev/v1beta1")
		if spec.NodePort != 0 && spec.NodePort != spec.Port {
			warn("spec.port (%d) overrides spec.nodePort (%d)", spec.Port, spec.NodePort)
		}
	}
	if spec.Weight != 0 && spec.Weight != 1 {
		if !takenWeights(a)[specPath.Child("weight").String()] {
			warn("spec.weight is ignored because every target sets its own weight: use spec.services[].weight")
		} else {
			warn("spec.weight is deprecated: use spec.services[].weight")
		}
	}
	if spec.BackendSetName != "" {
		warn("spec.backendSetName is deprecated: use spec.services[].backendSetName")
	}
	return warnings
}
