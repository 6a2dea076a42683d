package validation

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
)

// A claim is the pair (load balancer, backend set) that one LBRegistrar
// registers into. Two resources must never claim the same pair: each would
// overwrite or deregister the other's backends, and their writes would race
// on the load balancer.
//
// The webhook rejects a new overlap by reading its informer cache through the
// index of package index. Two creates admitted at the same instant both miss
// each other in the cache; the reconciler closes that race by giving the
// contested claim to the resource Precedes picks and setting the Conflict
// condition on the other, which then registers nothing in that backend set.

// ReplacesAnnotation lists, comma-separated, the names of LBRegistrars this
// one replaces (lbregistrar migrate writes it on the merged resource). A
// claim overlap with a resource named there is allowed, so that the
// replacement can be created before the old resources are deleted, and the
// replacing resource is the holder of the contested claims when the hand-over could
// not have been forged (see Precedes). Naming a resource there takes the
// right to update it, which admission checks. It names only resources
// created before the one it is on (replaces): once a named resource is
// deleted, whoever creates a resource of its name gains nothing by it.
const ReplacesAnnotation = "nodes.peppy-ratio.dev/replaces"

// Replaces returns the names annotations' ReplacesAnnotation lists.
func Replaces(annotations map[string]string) []string {
	var names []string
	for n := range strings.SplitSeq(annotations[ReplacesAnnotation], ",") {
		if n = strings.TrimSpace(n); n != "" && !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	return names
}

// ClaimKey is the index key of one (load balancer, backend set) claim:
// "<length of the load balancer id>:<load balancer id>/<backend set>". The
// length says where the id ends, so no two pairs share a key whatever they
// contain.
func ClaimKey(loadBalancerID, backendSetName string) string {
	return strconv.Itoa(len(loadBalancerID)) + ":" + loadBalancerID + "/" + backendSetName
}

// ClaimKeys returns the claim keys of a spec, each once, in order of first use.
func ClaimKeys(spec *v1beta1.LBRegistrarSpec) []string {
	keys := make([]string, 0, len(spec.Services))
	for i := range spec.Services {
		key := ClaimKey(spec.LoadBalancerID, spec.Services[i].BackendSetName)
		if !slices.Contains(keys, key) {
			keys = append(keys, key)
		}
	}
	return keys
}

// Precedes reports whether a keeps a claim that a and b both make: between
// a resource naming the other in ReplacesAnnotation and the one it names,
// the newcomer wins when both sign in as the same identity, and gives way
// otherwise; else the older one wins, then the one whose name sorts first.
// A resource not yet created (no creationTimestamp) is the newest. The
// reconciler sets the Conflict condition on the loser.
//
// The annotation may have been written past admission (before lbregistrar
// was installed, or before admission checked it), so it alone never takes
// a backend set from its holder: a writer who could name the holder's
// identity could already register anything there as it does, but one who
// signs in otherwise would make the holder stop maintaining its backends.
// A named resource that is gone contests nothing.
func Precedes(a, b *v1beta1.LBRegistrar) bool {
	if ar, br := replaces(a, b), replaces(b, a); ar != br {
		return ar == SameIdentity(&a.Spec, &b.Spec)
	}
	at, bt := a.CreationTimestamp, b.CreationTimestamp
	switch {
	case at.Equal(&bt):
		return a.Name < b.Name
	case at.IsZero():
		return false
	case bt.IsZero():
		return true
	}
	return at.Before(&bt)
}

// replaces reports whether obj replaces other: its ReplacesAnnotation names
// other, and other was created no later than obj (creation times count
// whole seconds, so a script creating both at once finds them equal). The
// resources a replacement is written for exist when it is created; a
// resource created after it took a name that was freed, or was never the
// one meant, and names on their own would hand it the replacement's
// claims. A resource not yet created (no creationTimestamp: being
// admitted, or read from a file) is the newest.
func replaces(obj, other *v1beta1.LBRegistrar) bool {
	created, by := other.CreationTimestamp, obj.CreationTimestamp
	return slices.Contains(Replaces(obj.Annotations), other.Name) && !created.IsZero() && (by.IsZero() || !by.Before(&created))
}

// SameIdentity reports whether a and b sign in to OCI as the same identity:
// the same API key (its Secrets included), workload identity or instance
// principal, in the same region.
func SameIdentity(a, b *v1beta1.LBRegistrarSpec) bool {
	return equality.Semantic.DeepEqual(a.APIKey, b.APIKey) &&
		equality.Semantic.DeepEqual(a.WorkloadIdentity, b.WorkloadIdentity) &&
		equality.Semantic.DeepEqual(a.InstancePrincipal, b.InstancePrincipal)
}

// ValidateClaims rejects every target of obj whose (load balancer, backend
// set) another resource already claims. claimants are the resources found
// through the claim index for obj's keys; obj itself and resources linked to
// it by ReplacesAnnotation (either way) are skipped. Each error names the
// other resource.
func ValidateClaims(obj *v1beta1.LBRegistrar, claimants []v1beta1.LBRegistrar) field.ErrorList {
	return validateClaims(obj, claimants, hubPaths(specPath))
}

// ValidateV1alpha1Claims is ValidateClaims for a v1alpha1 object, with errors
// on the fields the user wrote.
func ValidateV1alpha1Claims(a *Alpha, claimants []v1beta1.LBRegistrar) field.ErrorList {
	hub := &v1beta1.LBRegistrar{ObjectMeta: a.Object.ObjectMeta, Spec: a.Stored}
	return validateClaims(hub, claimants, a.paths())
}

func validateClaims(obj *v1beta1.LBRegistrar, claimants []v1beta1.LBRegistrar, paths specPaths) field.ErrorList {
	// owner maps each contested claim key to the first other resource, by
	// name, claiming it, so the result does not depend on cache order.
	var owner map[string]string
	for i := range claimants {
		c := &claimants[i]
		if c.Name == obj.Name || replaces(obj, c) || replaces(c, obj) {
			continue
		}
		for _, key := range ClaimKeys(&c.Spec) {
			if prev, ok := owner[key]; !ok || c.Name < prev {
				if owner == nil {
					owner = map[string]string{}
				}
				owner[key] = c.Name
			}
		}
	}
	if owner == nil {
		return nil
	}
	var errs field.ErrorList
	for i := range obj.Spec.Services {
		t := &obj.Spec.Services[i]
		other, ok := owner[ClaimKey(obj.Spec.LoadBalancerID, t.BackendSetName)]
		if !ok {
			continue
		}
		errs = append(errs, &field.Error{
			Type:     field.ErrorTypeDuplicate,
			Field:    paths.target(i).backendSetName.String(),
			BadValue: t.BackendSetName,
			Detail: fmt.Sprintf("backend set %q of load balancer %s is already claimed by LBRegistrar %q; add this target to that resource, or name it in the %s annotation if this resource replaces it",
				t.BackendSetName, obj.Spec.LoadBalancerID, other, ReplacesAnnotation),
			Origin: RuleClaimConflict,
		})
	}
	return errs
}
