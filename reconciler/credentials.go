package reconciler

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/reconciler/oci"
)

// credentialError is a problem with the API key a user can fix; it becomes
// the Ready condition's message and never contains key material.
type credentialError struct {
	reason, message string
}

func (e *credentialError) Error() string { return e.message }

const (
	reasonSecretNotFound      = "SecretNotFound"
	reasonInvalidCredentials  = "InvalidCredentials"
	reasonCredentialReadError = "CredentialReadError"
	reasonSecretNamespace     = "SecretNamespaceNotAllowed"
)

// credentials reads the API key of spec from its Secrets, in one of the
// namespaces given (any when none). Secrets are read straight from the API
// server, never cached, so no key material stays in the controller's memory
// beyond the client built from it.
func credentials(ctx context.Context, r client.Reader, key *v1beta1.APIKey, namespaces []string) (oci.Credentials, error) {
	c := oci.Credentials{Tenancy: key.Tenancy, User: key.User, Fingerprint: key.Fingerprint, Region: key.Region}
	var err error
	if c.PrivateKey, err = secretValue(ctx, r, &key.PrivateKey, "spec.apiKey.privateKey", namespaces); err != nil {
		return c, err
	}
	if key.Passphrase != nil {
		if c.Passphrase, err = secretValue(ctx, r, key.Passphrase, "spec.apiKey.passphrase", namespaces); err != nil {
			return c, err
		}
	}
	return c, nil
}

func secretValue(ctx context.Context, r client.Reader, src *v1beta1.SecretKeySource, field string, namespaces []string) ([]byte, error) {
	name := types.NamespacedName{Namespace: src.Namespace, Name: src.SecretKeyRef.Name}
	if len(namespaces) > 0 && !slices.Contains(namespaces, src.Namespace) {
		return nil, &credentialError{reasonSecretNamespace, fmt.Sprintf(
			"%s: Secret %s is outside the namespaces API keys are read from (%s); move it or add its namespace to --secret-namespaces",
			field, name, strings.Join(namespaces, ", "))}
	}
	var s corev1.Secret
	if err := r.Get(ctx, name, &s); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, &credentialError{reasonSecretNotFound, fmt.Sprintf("%s: Secret %s not found", field, name)}
		}
		return nil, &credentialError{reasonCredentialReadError, fmt.Sprintf("%s: reading Secret %s: %v", field, name, err)}
	}
	v, ok := s.Data[src.SecretKeyRef.Key]
	if !ok || len(v) == 0 {
		return nil, &credentialError{reasonSecretNotFound, fmt.Sprintf("%s: Secret %s has no key %q", field, name, src.SecretKeyRef.Key)}
	}
	return v, nil
}

// secretRefs lists the Secrets an API key reads, as namespace/name.
func secretRefs(key *v1beta1.APIKey) []string {
	refs := []string{key.PrivateKey.Namespace + "/" + key.PrivateKey.SecretKeyRef.Name}
	if p := key.Passphrase; p != nil {
		if ref := p.Namespace + "/" + p.SecretKeyRef.Name; ref != refs[0] {
			refs = append(refs, ref)
		}
	}
	return refs
}
