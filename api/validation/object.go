package validation

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/peppy-ratio/lbregistrar/api/v1alpha1"
	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/conversion"
)

var specPath = field.NewPath("spec")

// ValidateCreate checks a new v1beta1 LBRegistrar.
func ValidateCreate(obj *v1beta1.LBRegistrar) (field.ErrorList, []string) {
	return ValidateSpec(&obj.Spec, specPath), nil
}

// ValidateUpdate checks a v1beta1 LBRegistrar replacing old.
func ValidateUpdate(obj, old *v1beta1.LBRegistrar) (field.ErrorList, []string) {
	errs, warnings := Ratchet(ValidateSpec(&obj.Spec, specPath), ValidateSpec(&old.Spec, specPath))
	return append(errs, validateImmutable(&obj.Spec, &old.Spec)...), warnings
}

func validateImmutable(spec, old *v1beta1.LBRegistrarSpec) field.ErrorList {
	if spec.LoadBalancerID == old.LoadBalancerID {
		return nil
	}
	return field.ErrorList{field.Invalid(specPath.Child("loadBalancerId"), spec.LoadBalancerID,
		fmt.Sprintf("field is immutable (was %s): backends registered on the old load balancer would be left behind; create a new LBRegistrar for the other load balancer and delete this one", old.LoadBalancerID)).WithOrigin(RuleImmutable)}
}

// ValidateV1alpha1Create checks a new v1alpha1 LBRegistrar: the rules of its
// normalized v1beta1 form, reported on the v1alpha1 fields, plus the rules
// about fields only v1alpha1 has. Deprecated fields give warnings.
func ValidateV1alpha1Create(obj *v1alpha1.LBRegistrar) (field.ErrorList, []string) {
	errs := validateAlphaSpec(&obj.Spec)
	errs = append(errs, validateMixedTargets(&obj.Spec)...)
	return errs, deprecationWarnings(&obj.Spec)
}

// ValidateV1alpha1Update checks a v1alpha1 LBRegistrar replacing old. Mixing
// services with the single-service fields only warns here: the original
// operator accepted it, and such objects must stay editable.
func ValidateV1alpha1Update(obj, old *v1alpha1.LBRegistrar) (field.ErrorList, []string) {
	errs, warnings := Ratchet(validateAlphaSpec(&obj.Spec), validateAlphaSpec(&old.Spec))
	warnings = append(warnings, asWarnings(validateMixedTargets(&obj.Spec))...)
	newSpec, oldSpec := conversion.NormalizeSpec(&obj.Spec), conversion.NormalizeSpec(&old.Spec)
	errs = append(errs, validateImmutable(&newSpec, &oldSpec)...)
	return errs, append(warnings, deprecationWarnings(&obj.Spec)...)
}

// validateAlphaSpec runs the v1beta1 rules over the normalized form of spec,
// plus the range checks that normalization would hide (a negative weight
// becomes the default).
func validateAlphaSpec(spec *v1alpha1.LBRegistrarSpec) field.ErrorList {
	hub := conversion.NormalizeSpec(spec)
	errs := validateSpec(&hub, specPath, alphaPaths(spec))
	errs = append(errs, nonNegative(spec.Weight, specPath.Child("weight"), RuleWeight)...)
	errs = append(errs, nonNegative(spec.Port, specPath.Child("port"), RulePort)...)
	errs = append(errs, nonNegative(spec.NodePort, specPath.Child("nodePort"), RulePort)...)
	if spec.Service != nil && len(spec.Services) == 0 {
		errs = append(errs, nonNegative(spec.Service.Weight, specPath.Child("service", "weight"), RuleWeight)...)
	}
	for i := range spec.Services {
		errs = append(errs, nonNegative(spec.Services[i].Weight, specPath.Child("services").Index(i).Child("weight"), RuleWeight)...)
	}
	return errs
}

func nonNegative(v int, fldPath *field.Path, rule string) field.ErrorList {
	if v >= 0 {
		return nil
	}
	return field.ErrorList{field.Invalid(fldPath, v, "must not be negative").WithOrigin(rule)}
}

// alphaPaths maps the targets of conversion.NormalizeSpec(spec) back to the
// v1alpha1 fields they came from, following the same precedence.
func alphaPaths(spec *v1alpha1.LBRegistrarSpec) specPaths {
	paths := specPaths{targets: specPath.Child("services")}
	switch {
	case len(spec.Services) > 0:
		paths.target = func(i int) targetPaths {
			p := entryPaths(specPath.Child("services").Index(i))
			if spec.Services[i].BackendSetName == "" {
				p.backendSetName = specPath.Child("backendSetName")
			}
			return p
		}
	case spec.Service != nil:
		paths.target = func(int) targetPaths {
			p := entryPaths(specPath.Child("service"))
			if spec.Service.BackendSetName == "" {
				p.backendSetName = specPath.Child("backendSetName")
			}
			if spec.Service.Weight <= 0 {
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
				entry:          port,
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
// field the spec uses. spec.weight at its schema default (1) is not reported:
// every stored object has it.
func deprecationWarnings(spec *v1alpha1.LBRegistrarSpec) []string {
	var warnings []string
	warn := func(format string, args ...any) { warnings = append(warnings, fmt.Sprintf(format, args...)) }
	if spec.Service != nil {
		warn("spec.service is deprecated: use spec.services")
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
		if len(spec.Services) > 0 {
			warn("spec.weight is ignored because spec.services is set: use spec.services[].weight")
		} else {
			warn("spec.weight is deprecated: use spec.services[].weight")
		}
	}
	if spec.BackendSetName != "" {
		warn("spec.backendSetName is deprecated: use spec.services[].backendSetName")
	}
	return warnings
}
