package validation

import (
	"reflect"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Rule names, set as field.Error.Origin on every error this package returns.
// They are stable: metrics and CI output use them as labels.
const (
	RuleLoadBalancerID  = "load-balancer-id"
	RuleRegion          = "region"
	RuleTenancy         = "tenancy"
	RuleUser            = "user"
	RuleFingerprint     = "fingerprint"
	RuleSecretReference = "secret-reference"
	// RuleIdentity: not exactly one of apiKey, workloadIdentity and
	// instancePrincipal.
	RuleIdentity = "identity"
	// RuleServiceAccountReference: a malformed workload identity
	// ServiceAccount name or namespace.
	RuleServiceAccountReference = "service-account-reference"
	RuleTargetRequired          = "target-required"
	RuleTargetLimit             = "target-limit"
	RuleTargetKind              = "target-kind"
	// RuleTargetType: spec.services[].targetType unknown, or Pod with a
	// field only nodes have (nodePort, filterByEndpoints).
	RuleTargetType      = "target-type"
	RuleServiceRef      = "service-reference"
	RulePort            = "port"
	RuleWeight          = "weight"
	RuleBackendSetName  = "backend-set-name"
	RuleDuplicateTarget = "duplicate-target"
	RuleMixedTargets    = "mixed-targets"
	RuleImmutable       = "immutable"
	// RuleDeletionPolicy: spec.deletionPolicy other than Delete or Orphan.
	RuleDeletionPolicy = "deletion-policy"
	RuleClaimConflict  = "claim-conflict"
	// RuleConversionAnnotation: a write set or changed an annotation only
	// conversion writes.
	RuleConversionAnnotation = "conversion-annotation"
	// RuleSecretNamespace: an API key Secret outside --secret-namespaces.
	RuleSecretNamespace = "secret-namespace"
	// RuleSecretAccess: the writer may not read an API key Secret the
	// resource names (checked by the webhook, which knows the writer).
	RuleSecretAccess = "secret-access"
	// RuleServiceAccountAccess: the writer may not create tokens for the
	// ServiceAccount a workload identity names (checked by the webhook).
	RuleServiceAccountAccess = "service-account-access"
	// RuleControllerIdentity: a resource signs in as the controller itself,
	// which serve does not allow or the writer may not use (checked by the
	// webhook).
	RuleControllerIdentity = "controller-identity"
	// RuleOwnershipRecord: a status write by anyone but the controller
	// changed the ownership record (checked by the webhook, which knows the
	// writer).
	RuleOwnershipRecord = "ownership-record"
	// RuleReplacesAccess: the writer may not update a resource the
	// replaces annotation newly names (checked by the webhook).
	RuleReplacesAccess = "replaces-access"
	// RuleServiceAccess: the writer may not update a Service a target
	// newly names (checked by the webhook).
	RuleServiceAccess = "service-access"
)

// Ratchet keeps the errors of an updated object that its old version did not
// already have, and turns the others into warnings: a rule added or tightened
// after an object was stored must not make that object uneditable. An error
// is "already had" when the old object broke the same rule on the same field
// with the same value, so an edit of the faulty field is still checked.
func Ratchet(errs, old field.ErrorList) (field.ErrorList, []string) {
	var kept field.ErrorList
	var warnings []string
	for _, err := range errs {
		if containsError(old, err) {
			warnings = append(warnings, err.Error()+" (already present before this update)")
			continue
		}
		kept = append(kept, err)
	}
	return kept, warnings
}

func containsError(list field.ErrorList, err *field.Error) bool {
	for _, e := range list {
		if e.Type == err.Type && e.Field == err.Field && e.Origin == err.Origin && reflect.DeepEqual(e.BadValue, err.BadValue) {
			return true
		}
	}
	return false
}

// asWarnings renders errors as warnings, for rules that only warn on update.
func asWarnings(errs field.ErrorList) []string {
	warnings := make([]string, 0, len(errs))
	for _, err := range errs {
		warnings = append(warnings, err.Error())
	}
	return warnings
}
