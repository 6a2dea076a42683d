package validation

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/intstr"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
)

// OCI's limits on what a registration may say.
const (
	// Both the load balancer and the network load balancer services document
	// backend weights from 1 to 100.
	minWeight, maxWeight = 1, 100

	// Backend set names: letters, digits, '-' and '_', at most 32 characters.
	maxBackendSetNameLength = 32
)

// MaxTargets is the most targets (spec.services items) an LBRegistrar may have, in
// either version: enough for every port of a large ingress, and small enough
// that one resource stays a small object and one reconcile a bounded amount
// of work. The CRD schema of both versions says the same (maxItems), for
// clients that do not call the webhook.
const MaxTargets = 256

// specPaths says where the user wrote each part of a normalized spec, so that
// errors about a v1alpha1 object name its own fields rather than the v1beta1
// fields they were normalized into.
type specPaths struct {
	// targets is where a missing target is reported.
	targets *field.Path
	// target gives the fields of normalized target i.
	target func(i int) targetPaths
}

// targetPaths are the fields one normalized target came from.
type targetPaths struct {
	item, name, namespace, port, nodePort, backendSetName, weight *field.Path
	targetType, filterByEndpoints                                 *field.Path
}

func hubPaths(spec *field.Path) specPaths {
	services := spec.Child("services")
	return specPaths{
		targets: services,
		target:  func(i int) targetPaths { return itemPaths(services.Index(i)) },
	}
}

func itemPaths(item *field.Path) targetPaths {
	return targetPaths{
		item:           item,
		name:           item.Child("name"),
		namespace:      item.Child("namespace"),
		port:           item.Child("port"),
		nodePort:       item.Child("nodePort"),
		backendSetName: item.Child("backendSetName"),
		weight:         item.Child("weight"),

		targetType:        item.Child("targetType"),
		filterByEndpoints: item.Child("filterByEndpoints"),
	}
}

// ValidateSpec checks a v1beta1 spec on its own: identifiers, credentials,
// targets and duplicates within the resource. fldPath is the spec's path.
func ValidateSpec(spec *v1beta1.LBRegistrarSpec, fldPath *field.Path) field.ErrorList {
	return validateSpec(spec, fldPath, hubPaths(fldPath))
}

func validateSpec(spec *v1beta1.LBRegistrarSpec, fldPath *field.Path, paths specPaths) field.ErrorList {
	errs := validateLoadBalancerID(spec.LoadBalancerID, fldPath.Child("loadBalancerId"))
	errs = append(errs, validateIdentity(spec, fldPath)...)
	switch spec.DeletionPolicy {
	case "", v1beta1.DeletionPolicyDelete, v1beta1.DeletionPolicyOrphan:
	default:
		errs = append(errs, field.NotSupported(fldPath.Child("deletionPolicy"), spec.DeletionPolicy,
			[]v1beta1.DeletionPolicy{v1beta1.DeletionPolicyDelete, v1beta1.DeletionPolicyOrphan}).WithOrigin(RuleDeletionPolicy))
	}
	if len(spec.Services) == 0 {
		errs = append(errs, field.Required(paths.targets, "at least one target is required").WithOrigin(RuleTargetRequired))
	}
	errs = append(errs, ValidateTargetCount(len(spec.Services), paths.targets)...)
	for i := range spec.Services {
		errs = append(errs, validateTarget(&spec.Services[i], paths, i)...)
	}
	return append(errs, validateDuplicates(spec.Services, paths)...)
}

// ValidateTargetCount checks the number of targets (spec.services items), fldPath,
// against MaxTargets. Readers of untrusted input call it before decoding
// the targets themselves.
func ValidateTargetCount(n int, fldPath *field.Path) field.ErrorList {
	if n > MaxTargets {
		return field.ErrorList{field.TooMany(fldPath, n, MaxTargets).WithOrigin(RuleTargetLimit)}
	}
	return nil
}

func validateLoadBalancerID(id string, fldPath *field.Path) field.ErrorList {
	switch {
	case id == "":
		return field.ErrorList{field.Required(fldPath, "the OCID of a load balancer or network load balancer").WithOrigin(RuleLoadBalancerID)}
	case !isOCID(id, "loadbalancer", "networkloadbalancer"):
		return field.ErrorList{field.Invalid(fldPath, id, "must be the OCID of a load balancer (ocid1.loadbalancer.…) or network load balancer (ocid1.networkloadbalancer.…)").WithOrigin(RuleLoadBalancerID)}
	}
	return nil
}

// validateIdentity checks that spec names exactly one way to sign in to
// OCI, and that one.
func validateIdentity(spec *v1beta1.LBRegistrarSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	var named []string
	if spec.APIKey != nil {
		named = append(named, "apiKey")
		errs = append(errs, validateAPIKey(spec.APIKey, fldPath.Child("apiKey"))...)
	}
	if w := spec.WorkloadIdentity; w != nil {
		named = append(named, "workloadIdentity")
		path := fldPath.Child("workloadIdentity")
		errs = append(errs, validateRegion(w.Region, path)...)
		if sa := w.ServiceAccount; sa != nil {
			path := path.Child("serviceAccount")
			errs = append(errs, validateName(sa.Namespace, func() *field.Path { return path.Child("namespace") }, dns1123Label, RuleServiceAccountReference)...)
			errs = append(errs, validateName(sa.Name, func() *field.Path { return path.Child("name") }, dns1123Subdomain, RuleServiceAccountReference)...)
		}
	}
	if p := spec.InstancePrincipal; p != nil {
		named = append(named, "instancePrincipal")
		errs = append(errs, validateRegion(p.Region, fldPath.Child("instancePrincipal"))...)
	}
	switch {
	case len(named) == 0:
		errs = append(errs, field.Required(fldPath.Child("apiKey"), "set one of apiKey, workloadIdentity and instancePrincipal: how lbregistrar signs in to OCI").WithOrigin(RuleIdentity))
	case len(named) > 1:
		for _, n := range named[1:] {
			errs = append(errs, field.Forbidden(fldPath.Child(n), "set only one of apiKey, workloadIdentity and instancePrincipal; "+named[0]+" is set").WithOrigin(RuleIdentity))
		}
	}
	return errs
}

func validateRegion(region string, parent *field.Path) field.ErrorList {
	return matchRequired(region, isRegion, parent, "region", RuleRegion, "must be an OCI region identifier such as ap-tokyo-1, or a region key such as nrt")
}

func validateAPIKey(key *v1beta1.APIKey, fldPath *field.Path) field.ErrorList {
	errs := matchRequired(key.User, isUserOCID, fldPath, "user", RuleUser, "must be a user OCID (ocid1.user.…)")
	errs = append(errs, matchRequired(key.Tenancy, isTenancyOCID, fldPath, "tenancy", RuleTenancy, "must be a tenancy OCID (ocid1.tenancy.…)")...)
	errs = append(errs, validateRegion(key.Region, fldPath)...)
	errs = append(errs, matchRequired(key.Fingerprint, isFingerprint, fldPath, "fingerprint", RuleFingerprint, "must be 16 colon-separated hex pairs, as OCI shows for an API key")...)
	errs = append(errs, validateSecretKeySource(&key.PrivateKey, fldPath.Child("privateKey"))...)
	if key.Passphrase != nil {
		errs = append(errs, validateSecretKeySource(key.Passphrase, fldPath.Child("passphrase"))...)
	}
	return errs
}

func isUserOCID(s string) bool    { return isOCID(s, "user") }
func isTenancyOCID(s string) bool { return isOCID(s, "tenancy") }

// matchRequired checks the required string parent.name with match. The path
// is built only for an error: this runs on every admission request.
func matchRequired(value string, match func(string) bool, parent *field.Path, name, rule, detail string) field.ErrorList {
	switch {
	case value == "":
		return field.ErrorList{field.Required(parent.Child(name), "").WithOrigin(rule)}
	case !match(value):
		return field.ErrorList{field.Invalid(parent.Child(name), value, detail).WithOrigin(rule)}
	}
	return nil
}

func validateSecretKeySource(ref *v1beta1.SecretKeySource, fldPath *field.Path) field.ErrorList {
	errs := validateName(ref.Namespace, func() *field.Path { return fldPath.Child("namespace") }, dns1123Label, RuleSecretReference)
	errs = append(errs, validateName(ref.SecretKeyRef.Name, func() *field.Path { return fldPath.Child("secretKeyRef", "name") }, dns1123Subdomain, RuleSecretReference)...)
	return append(errs, validateName(ref.SecretKeyRef.Key, func() *field.Path { return fldPath.Child("secretKeyRef", "key") }, configMapKey, RuleSecretReference)...)
}

// validateName checks a required Kubernetes name; the path is built only
// for an error.
func validateName(value string, fldPath func() *field.Path, check nameCheck, rule string) field.ErrorList {
	if value == "" {
		return field.ErrorList{field.Required(fldPath(), "").WithOrigin(rule)}
	}
	var errs field.ErrorList
	for _, msg := range check.errors(value) {
		errs = append(errs, field.Invalid(fldPath(), value, msg).WithOrigin(rule))
	}
	return errs
}

// validateTarget checks target i; its paths are built only for an error.
func validateTarget(t *v1beta1.Target, paths specPaths, i int) field.ErrorList {
	p := func() targetPaths { return paths.target(i) }
	var errs field.ErrorList
	isService := t.Name != "" || t.Namespace != "" || t.Port != nil
	switch {
	case t.NodePort != 0 && isService:
		errs = append(errs, field.Invalid(p().item, describeTarget(t), "set either name, namespace and port (a Service) or nodePort (a fixed port), not both").WithOrigin(RuleTargetKind))
	case t.NodePort != 0:
		if t.NodePort < 1 || t.NodePort > 65535 {
			errs = append(errs, field.Invalid(p().nodePort, t.NodePort, utilvalidation.InclusiveRangeError(1, 65535)).WithOrigin(RulePort))
		}
	case isService:
		errs = append(errs, validateName(t.Name, func() *field.Path { return p().name }, dns1035Label, RuleServiceRef)...)
		errs = append(errs, validateName(t.Namespace, func() *field.Path { return p().namespace }, dns1123Label, RuleServiceRef)...)
		errs = append(errs, validateServicePort(t.Port, func() *field.Path { return p().port })...)
	default:
		errs = append(errs, field.Required(p().item, "a Service (name, namespace and port) or a fixed nodePort").WithOrigin(RuleTargetKind))
	}
	errs = append(errs, validateTargetType(t, p)...)
	if t.Weight < minWeight || t.Weight > maxWeight {
		errs = append(errs, field.Invalid(p().weight, t.Weight, utilvalidation.InclusiveRangeError(minWeight, maxWeight)).WithOrigin(RuleWeight))
	}
	return append(errs, validateBackendSetName(t.BackendSetName, func() *field.Path { return p().backendSetName })...)
}

// targetTypes are the values of spec.services[].targetType; empty is NodePort.
var targetTypes = []string{string(v1beta1.TargetTypeNodePort), string(v1beta1.TargetTypePod)}

// validateTargetType checks targetType, and that a Pod target names a
// Service port: its backends are the port's endpoints, not nodes.
func validateTargetType(t *v1beta1.Target, p func() targetPaths) field.ErrorList {
	switch t.TargetType {
	case "", v1beta1.TargetTypeNodePort:
		return nil
	case v1beta1.TargetTypePod:
	default:
		return field.ErrorList{field.NotSupported(p().targetType, t.TargetType, targetTypes).WithOrigin(RuleTargetType)}
	}
	var errs field.ErrorList
	if t.NodePort != 0 {
		errs = append(errs, field.Invalid(p().nodePort, t.NodePort, "targetType Pod registers a Service's endpoints: set name, namespace and port, not nodePort").WithOrigin(RuleTargetType))
	}
	if t.FilterByEndpoints {
		errs = append(errs, field.Invalid(p().filterByEndpoints, true, "filterByEndpoints chooses nodes; targetType Pod registers the endpoints themselves").WithOrigin(RuleTargetType))
	}
	return errs
}

// validateServicePort checks a Service port given by number or by name.
func validateServicePort(port *intstr.IntOrString, fldPath func() *field.Path) field.ErrorList {
	switch {
	case port == nil || port.Type == intstr.Int && port.IntVal == 0 || port.Type == intstr.String && port.StrVal == "":
		return field.ErrorList{field.Required(fldPath(), "a Service port number or name").WithOrigin(RulePort)}
	case port.Type == intstr.Int && (port.IntVal < 1 || port.IntVal > 65535):
		return field.ErrorList{field.Invalid(fldPath(), port.IntVal, utilvalidation.InclusiveRangeError(1, 65535)).WithOrigin(RulePort)}
	case port.Type == intstr.String:
		// Service port names are DNS-1123 labels.
		var errs field.ErrorList
		for _, msg := range dns1123Label.errors(port.StrVal) {
			errs = append(errs, field.Invalid(fldPath(), port.StrVal, msg).WithOrigin(RulePort))
		}
		return errs
	}
	return nil
}

func validateBackendSetName(name string, fldPath func() *field.Path) field.ErrorList {
	switch {
	case name == "":
		return field.ErrorList{field.Required(fldPath(), "the backend set the nodes are registered in").WithOrigin(RuleBackendSetName)}
	case len(name) > maxBackendSetNameLength:
		return field.ErrorList{field.TooLong(fldPath(), name, maxBackendSetNameLength).WithOrigin(RuleBackendSetName)}
	case !isBackendSetName(name):
		return field.ErrorList{field.Invalid(fldPath(), name, "OCI backend set names contain only letters, digits, '-' and '_'").WithOrigin(RuleBackendSetName)}
	}
	return nil
}

// validateDuplicates rejects two targets that register the same node port in
// the same backend set. Several targets may share a backend set (their
// backends are unioned), but one node address:port is one backend in OCI and
// cannot be registered twice, with the same weight or with two.
func validateDuplicates(targets []v1beta1.Target, paths specPaths) field.ErrorList {
	var errs field.ErrorList
	first := make(map[targetKey]int, len(targets))
	for i := range targets {
		t := &targets[i]
		key := keyOf(t)
		j, seen := first[key]
		if !seen {
			first[key] = i
			continue
		}
		detail := fmt.Sprintf("registers the same %s in backend set %q as %s", describeTarget(t), t.BackendSetName, paths.target(j).item)
		switch prev := &targets[j]; {
		case prev.Weight != t.Weight:
			detail += fmt.Sprintf(", with weight %d instead of %d: one backend cannot carry two weights", t.Weight, prev.Weight)
		case prev.FilterByEndpoints != t.FilterByEndpoints:
			detail += fmt.Sprintf(", with filterByEndpoints %t instead of %t", t.FilterByEndpoints, prev.FilterByEndpoints)
		}
		errs = append(errs, &field.Error{Type: field.ErrorTypeDuplicate, Field: paths.target(i).item.String(), BadValue: describeTarget(t), Detail: detail, Origin: RuleDuplicateTarget})
	}
	return errs
}

// targetKey identifies what a target registers, and where.
type targetKey struct {
	backendSet, namespace, name string
	port                        intstr.IntOrString
	nodePort                    int32
	pods                        bool // a Service port's endpoints and its node port are different backends
}

func keyOf(t *v1beta1.Target) targetKey {
	k := targetKey{backendSet: t.BackendSetName, namespace: t.Namespace, name: t.Name, nodePort: t.NodePort, pods: t.Pods()}
	if t.Port != nil {
		k.port = *t.Port
	}
	return k
}

// describeTarget names what a target registers: a Service port or a fixed port.
func describeTarget(t *v1beta1.Target) string {
	if t.NodePort != 0 && t.Name == "" && t.Namespace == "" && t.Port == nil {
		return fmt.Sprintf("nodePort %d", t.NodePort)
	}
	var b strings.Builder
	if t.Pods() {
		b.WriteString("the endpoints of ")
	}
	fmt.Fprintf(&b, "Service %s/%s", t.Namespace, t.Name)
	if t.Port != nil {
		fmt.Fprintf(&b, " port %s", t.Port.String())
	}
	if t.NodePort != 0 {
		fmt.Fprintf(&b, " nodePort %d", t.NodePort)
	}
	return b.String()
}
