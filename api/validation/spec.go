package validation

import (
	"fmt"
	"regexp"
	"strings"

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

var (
	// An OCID is ocid1.<resource type>.<realm>.[region][.future use].<unique id>.
	loadBalancerOCID = ocidPattern("loadbalancer|networkloadbalancer")
	tenancyOCID      = ocidPattern("tenancy")
	userOCID         = ocidPattern("user")

	// A region identifier (ap-tokyo-1, us-gov-ashburn-1) or a region key (nrt),
	// the two forms the OCI SDK resolves.
	regionPattern = regexp.MustCompile(`^([a-z]+(-[a-z]+)+-[0-9]+|[a-z]{3})$`)

	// The fingerprint of an API signing key: 16 colon-separated hex pairs.
	fingerprintPattern = regexp.MustCompile(`^[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){15}$`)

	backendSetNamePattern = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
)

func ocidPattern(resourceType string) *regexp.Regexp {
	return regexp.MustCompile(`^ocid1\.(` + resourceType + `)\.[a-z0-9]+\.[a-z0-9-]*(\.[a-z0-9-]+)?\.[a-z0-9]+$`)
}

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
	entry, name, namespace, port, nodePort, backendSetName, weight *field.Path
}

func hubPaths(spec *field.Path) specPaths {
	services := spec.Child("services")
	return specPaths{
		targets: services,
		target:  func(i int) targetPaths { return entryPaths(services.Index(i)) },
	}
}

func entryPaths(entry *field.Path) targetPaths {
	return targetPaths{
		entry:          entry,
		name:           entry.Child("name"),
		namespace:      entry.Child("namespace"),
		port:           entry.Child("port"),
		nodePort:       entry.Child("nodePort"),
		backendSetName: entry.Child("backendSetName"),
		weight:         entry.Child("weight"),
	}
}

// ValidateSpec checks a v1beta1 spec on its own: identifiers, credentials,
// targets and duplicates within the resource. fldPath is the spec's path.
func ValidateSpec(spec *v1beta1.LBRegistrarSpec, fldPath *field.Path) field.ErrorList {
	return validateSpec(spec, fldPath, hubPaths(fldPath))
}

func validateSpec(spec *v1beta1.LBRegistrarSpec, fldPath *field.Path, paths specPaths) field.ErrorList {
	errs := validateLoadBalancerID(spec.LoadBalancerID, fldPath.Child("loadBalancerId"))
	errs = append(errs, validateAPIKey(&spec.APIKey, fldPath.Child("apiKey"))...)
	if len(spec.Services) == 0 {
		errs = append(errs, field.Required(paths.targets, "at least one target is required").WithOrigin(RuleTargetRequired))
	}
	for i := range spec.Services {
		errs = append(errs, validateTarget(&spec.Services[i], paths.target(i))...)
	}
	return append(errs, validateDuplicates(spec.Services, paths)...)
}

func validateLoadBalancerID(id string, fldPath *field.Path) field.ErrorList {
	switch {
	case id == "":
		return field.ErrorList{field.Required(fldPath, "the OCID of a load balancer or network load balancer").WithOrigin(RuleLoadBalancerID)}
	case !loadBalancerOCID.MatchString(id):
		return field.ErrorList{field.Invalid(fldPath, id, "must be the OCID of a load balancer (ocid1.loadbalancer.…) or network load balancer (ocid1.networkloadbalancer.…)").WithOrigin(RuleLoadBalancerID)}
	}
	return nil
}

func validateAPIKey(key *v1beta1.APIKey, fldPath *field.Path) field.ErrorList {
	errs := matchRequired(key.User, userOCID, fldPath.Child("user"), RuleUser, "must be a user OCID (ocid1.user.…)")
	errs = append(errs, matchRequired(key.Tenancy, tenancyOCID, fldPath.Child("tenancy"), RuleTenancy, "must be a tenancy OCID (ocid1.tenancy.…)")...)
	errs = append(errs, matchRequired(key.Region, regionPattern, fldPath.Child("region"), RuleRegion, "must be an OCI region identifier such as ap-tokyo-1, or a region key such as nrt")...)
	errs = append(errs, matchRequired(key.Fingerprint, fingerprintPattern, fldPath.Child("fingerprint"), RuleFingerprint, "must be 16 colon-separated hex pairs, as OCI shows for an API key")...)
	errs = append(errs, validateSecretKeySource(&key.PrivateKey, fldPath.Child("privateKey"))...)
	if key.Passphrase != nil {
		errs = append(errs, validateSecretKeySource(key.Passphrase, fldPath.Child("passphrase"))...)
	}
	return errs
}

// matchRequired checks a required string against a pattern.
func matchRequired(value string, pattern *regexp.Regexp, fldPath *field.Path, rule, detail string) field.ErrorList {
	switch {
	case value == "":
		return field.ErrorList{field.Required(fldPath, "").WithOrigin(rule)}
	case !pattern.MatchString(value):
		return field.ErrorList{field.Invalid(fldPath, value, detail).WithOrigin(rule)}
	}
	return nil
}

func validateSecretKeySource(ref *v1beta1.SecretKeySource, fldPath *field.Path) field.ErrorList {
	errs := validateName(ref.Namespace, fldPath.Child("namespace"), utilvalidation.IsDNS1123Label, RuleSecretReference)
	secretRef := fldPath.Child("secretKeyRef")
	errs = append(errs, validateName(ref.SecretKeyRef.Name, secretRef.Child("name"), utilvalidation.IsDNS1123Subdomain, RuleSecretReference)...)
	return append(errs, validateName(ref.SecretKeyRef.Key, secretRef.Child("key"), utilvalidation.IsConfigMapKey, RuleSecretReference)...)
}

// validateName checks a required Kubernetes name with one of apimachinery's
// name checks.
func validateName(value string, fldPath *field.Path, check func(string) []string, rule string) field.ErrorList {
	if value == "" {
		return field.ErrorList{field.Required(fldPath, "").WithOrigin(rule)}
	}
	var errs field.ErrorList
	for _, msg := range check(value) {
		errs = append(errs, field.Invalid(fldPath, value, msg).WithOrigin(rule))
	}
	return errs
}

func validateTarget(t *v1beta1.Target, paths targetPaths) field.ErrorList {
	var errs field.ErrorList
	isService := t.Name != "" || t.Namespace != "" || t.Port != nil
	switch {
	case t.NodePort != 0 && isService:
		errs = append(errs, field.Invalid(paths.entry, describeTarget(t), "set either name, namespace and port (a Service) or nodePort (a fixed port), not both").WithOrigin(RuleTargetKind))
	case t.NodePort != 0:
		if t.NodePort < 1 || t.NodePort > 65535 {
			errs = append(errs, field.Invalid(paths.nodePort, t.NodePort, utilvalidation.InclusiveRangeError(1, 65535)).WithOrigin(RulePort))
		}
	case isService:
		errs = append(errs, validateName(t.Name, paths.name, utilvalidation.IsDNS1035Label, RuleServiceRef)...)
		errs = append(errs, validateName(t.Namespace, paths.namespace, utilvalidation.IsDNS1123Label, RuleServiceRef)...)
		errs = append(errs, validateServicePort(t, paths.port)...)
	default:
		errs = append(errs, field.Required(paths.entry, "a Service (name, namespace and port) or a fixed nodePort").WithOrigin(RuleTargetKind))
	}
	if t.Weight < minWeight || t.Weight > maxWeight {
		errs = append(errs, field.Invalid(paths.weight, t.Weight, utilvalidation.InclusiveRangeError(minWeight, maxWeight)).WithOrigin(RuleWeight))
	}
	return append(errs, validateBackendSetName(t.BackendSetName, paths.backendSetName)...)
}

// validateServicePort checks a Service port given by number or by name.
func validateServicePort(t *v1beta1.Target, fldPath *field.Path) field.ErrorList {
	port := t.Port
	switch {
	case port == nil || port.String() == "" || port.String() == "0":
		return field.ErrorList{field.Required(fldPath, "a Service port number or name").WithOrigin(RulePort)}
	case port.StrVal == "" && (port.IntVal < 1 || port.IntVal > 65535):
		return field.ErrorList{field.Invalid(fldPath, port.IntVal, utilvalidation.InclusiveRangeError(1, 65535)).WithOrigin(RulePort)}
	case port.StrVal != "":
		// Service port names are DNS-1123 labels.
		var errs field.ErrorList
		for _, msg := range utilvalidation.IsDNS1123Label(port.StrVal) {
			errs = append(errs, field.Invalid(fldPath, port.StrVal, msg).WithOrigin(RulePort))
		}
		return errs
	}
	return nil
}

func validateBackendSetName(name string, fldPath *field.Path) field.ErrorList {
	switch {
	case name == "":
		return field.ErrorList{field.Required(fldPath, "the backend set the nodes are registered in").WithOrigin(RuleBackendSetName)}
	case len(name) > maxBackendSetNameLength:
		return field.ErrorList{field.TooLong(fldPath, name, maxBackendSetNameLength).WithOrigin(RuleBackendSetName)}
	case !backendSetNamePattern.MatchString(name):
		return field.ErrorList{field.Invalid(fldPath, name, "OCI backend set names hold only letters, digits, '-' and '_'").WithOrigin(RuleBackendSetName)}
	}
	return nil
}

// validateDuplicates rejects two entries that register the same node port in
// the same backend set. Several entries may share a backend set (their
// backends are unioned), but one node address:port is one backend in OCI and
// cannot be registered twice, with the same weight or with two.
func validateDuplicates(targets []v1beta1.Target, paths specPaths) field.ErrorList {
	var errs field.ErrorList
	first := make(map[string]int, len(targets))
	for i := range targets {
		t := &targets[i]
		key := t.BackendSetName + "\x00" + describeTarget(t)
		j, seen := first[key]
		if !seen {
			first[key] = i
			continue
		}
		detail := fmt.Sprintf("registers the same %s in backend set %q as %s", describeTarget(t), t.BackendSetName, paths.target(j).entry)
		switch prev := &targets[j]; {
		case prev.Weight != t.Weight:
			detail += fmt.Sprintf(", with weight %d instead of %d: one backend cannot carry two weights", t.Weight, prev.Weight)
		case prev.FilterByEndpoints != t.FilterByEndpoints:
			detail += fmt.Sprintf(", with filterByEndpoints %t instead of %t", t.FilterByEndpoints, prev.FilterByEndpoints)
		}
		errs = append(errs, &field.Error{Type: field.ErrorTypeDuplicate, Field: paths.target(i).entry.String(), BadValue: describeTarget(t), Detail: detail, Origin: RuleDuplicateTarget})
	}
	return errs
}

// describeTarget names what a target registers: a Service port or a fixed port.
func describeTarget(t *v1beta1.Target) string {
	if t.NodePort != 0 && t.Name == "" && t.Namespace == "" && t.Port == nil {
		return fmt.Sprintf("nodePort %d", t.NodePort)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Service %s/%s", t.Namespace, t.Name)
	if t.Port != nil {
		fmt.Fprintf(&b, " port %s", t.Port.String())
	}
	if t.NodePort != 0 {
		fmt.Fprintf(&b, " nodePort %d", t.NodePort)
	}
	return b.String()
}
