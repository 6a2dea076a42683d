package validation

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
)

// SecretReference is one Secret an API key is read from, with the field
// that names it.
type SecretReference struct {
	Field     *field.Path
	Namespace string
	Name      string
}

// SecretReferences lists the Secrets spec's API key reads: the private key,
// then the passphrase when given; none when it signs in without a key.
func SecretReferences(spec *v1beta1.LBRegistrarSpec) []SecretReference {
	if spec.APIKey == nil {
		return nil
	}
	key := specPath.Child("apiKey")
	refs := []SecretReference{{key.Child("privateKey"), spec.APIKey.PrivateKey.Namespace, spec.APIKey.PrivateKey.SecretKeyRef.Name}}
	if p := spec.APIKey.Passphrase; p != nil {
		refs = append(refs, SecretReference{key.Child("passphrase"), p.Namespace, p.SecretKeyRef.Name})
	}
	return refs
}

// SecretNamespaceAllowed reports whether API keys may be read from
// namespace, given the namespaces lbregistrar serve reads them from (any
// when empty).
func SecretNamespaceAllowed(namespace string, allowed []string) bool {
	return len(allowed) == 0 || slices.Contains(allowed, namespace)
}

// ValidateSecretNamespaces refuses API key Secrets, and workload identity
// ServiceAccounts, outside the namespaces lbregistrar reads them from: the
// controller could never read them, and the resource would only ever
// report that.
func ValidateSecretNamespaces(spec *v1beta1.LBRegistrarSpec, allowed []string) field.ErrorList {
	var errs field.ErrorList
	if sa := ServiceAccountReference(spec); sa != nil && !SecretNamespaceAllowed(sa.Namespace, allowed) {
		errs = append(errs, field.Forbidden(sa.Field, fmt.Sprintf(
			"ServiceAccount %s/%s is outside the namespaces lbregistrar signs in from (%s): use one there, or add its namespace to lbregistrar serve --secret-namespaces",
			sa.Namespace, sa.Name, strings.Join(allowed, ", "))).WithOrigin(RuleSecretNamespace))
	}
	for _, ref := range SecretReferences(spec) {
		if !SecretNamespaceAllowed(ref.Namespace, allowed) {
			errs = append(errs, field.Forbidden(ref.Field, fmt.Sprintf(
				"Secret %s/%s is outside the namespaces lbregistrar reads API keys from (%s): move it there, or add its namespace to lbregistrar serve --secret-namespaces",
				ref.Namespace, ref.Name, strings.Join(allowed, ", "))).WithOrigin(RuleSecretNamespace))
		}
	}
	return errs
}
