// Package credentials gives each resource the credentials its OCI calls are
// signed with: the API key its Secrets hold. Key material is read from the
// API server, never from an informer, kept only while a resource uses it,
// and never logged or put in a condition: a problem a user can fix is an
// *Error, whose message names the field and never holds a key.
//
// It reads Secrets and nothing else; it writes nothing.
package credentials

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/oracle/oci-go-sdk/v65/common"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/api/validation"
	"github.com/peppy-ratio/lbregistrar/reconciler/oci"
)

// Error is a problem with the API key a user can fix; it becomes the Ready
// condition's message and never contains key material.
type Error struct {
	Reason, Message string
	// Cause is logged, never put in a condition: see Secrets.get.
	Cause error
	// Retry says the problem may clear without an edit anyone can watch
	// (a ServiceAccount created, OKE's token exchange back): try again
	// soon rather than at the resync.
	Retry bool
}

func (e *Error) Error() string { return e.Message }

const (
	reasonSecretNotFound      = "SecretNotFound"
	reasonInvalidCredentials  = "InvalidCredentials"
	reasonCredentialReadError = "CredentialReadError"
	reasonSecretNamespace     = "SecretNamespaceNotAllowed"
	reasonIdentityUnsupported = "IdentityUnsupported"
)

// Secrets reads the values API keys point at. Values come from the API
// server, never from an informer (only Secrets' metadata is watched), and
// are kept per Secret resourceVersion, so an unchanged Secret is not fetched
// again on every reconcile; a changed one has a new resourceVersion. A value
// is kept only while an LBRegistrar's API key points at it, so key material
// no resource uses any more leaves the process's memory.
type Secrets struct {
	uncached   client.Reader // past the cache: Secret values are never cached by an informer
	meta       client.Reader // the Secret metadata informer's cache
	namespaces []string      // where API keys may live; any when empty

	mu      sync.Mutex
	values  map[string]secretValue // by namespace/name/key
	uses    map[string][]string    // the namespace/name/key an LBRegistrar's API key reads, by its name
	readers map[string]int         // how many LBRegistrars read a namespace/name/key
}

// NewSecrets reads Secret values through uncached, from the namespaces
// given (any when none); until Watch says otherwise, it reads their
// metadata there too.
func NewSecrets(uncached client.Reader, namespaces []string) *Secrets {
	return &Secrets{uncached: uncached, meta: uncached, namespaces: namespaces, values: map[string]secretValue{}, uses: map[string][]string{}, readers: map[string]int{}}
}

type secretValue struct {
	resourceVersion string
	value           []byte
}

// Watch has the Secrets' metadata read from meta, the cache of the
// informer that watches them, so an unchanged Secret is not read again.
func (s *Secrets) Watch(meta client.Reader) { s.meta = meta }

// Credentials reads the API key of the named LBRegistrar from its Secrets.
func (s *Secrets) Credentials(ctx context.Context, resource string, key *v1beta1.APIKey) (oci.Credentials, error) {
	refs := []string{valueRef(&key.PrivateKey)}
	if key.Passphrase != nil {
		refs = append(refs, valueRef(key.Passphrase))
	}
	s.use(resource, refs)
	c := oci.Credentials{Tenancy: key.Tenancy, User: key.User, Fingerprint: key.Fingerprint, Region: key.Region}
	var err error
	if c.PrivateKey, err = s.get(ctx, &key.PrivateKey, "spec.apiKey.privateKey"); err != nil {
		return c, err
	}
	if key.Passphrase != nil {
		if c.Passphrase, err = s.get(ctx, key.Passphrase, "spec.apiKey.passphrase"); err != nil {
			return c, err
		}
	}
	return c, nil
}

func (s *Secrets) get(ctx context.Context, src *v1beta1.SecretKeySource, field string) ([]byte, error) {
	name := types.NamespacedName{Namespace: src.Namespace, Name: src.SecretKeyRef.Name}
	if !validation.SecretNamespaceAllowed(src.Namespace, s.namespaces) {
		return nil, &Error{Reason: reasonSecretNamespace, Message: fmt.Sprintf(
			"%s: Secret %s is outside the namespaces API keys are read from (%s); move it or add its namespace to --secret-namespaces",
			field, name, strings.Join(s.namespaces, ", "))}
	}
	ref := valueRef(src)
	meta := &metav1.PartialObjectMetadata{}
	meta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	if s.meta.Get(ctx, name, meta) == nil {
		s.mu.Lock()
		v, ok := s.values[ref]
		s.mu.Unlock()
		if ok && v.resourceVersion == meta.ResourceVersion {
			return v.value, nil
		}
	}

	// Conditions are read by anyone who may read LBRegistrars: a missing
	// Secret and a missing key read the same, and no API error text is
	// passed on, so a condition tells no more than the spec already says.
	missing := &Error{Reason: reasonSecretNotFound, Message: fmt.Sprintf("%s: Secret %s has no key %q, or does not exist", field, name, src.SecretKeyRef.Key)}
	var secret corev1.Secret
	if err := s.uncached.Get(ctx, name, &secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, missing
		}
		return nil, &Error{Reason: reasonCredentialReadError, Cause: err,
			Message: fmt.Sprintf("%s: reading Secret %s failed (%s); see the lbregistrar log", field, name, apierrors.ReasonForError(err))}
	}
	v, ok := secret.Data[src.SecretKeyRef.Key]
	if !ok || len(v) == 0 {
		return nil, missing
	}
	s.mu.Lock()
	if s.readers[ref] > 0 { // not forgotten while it was read
		s.values[ref] = secretValue{resourceVersion: secret.ResourceVersion, value: v}
	}
	s.mu.Unlock()
	return v, nil
}

// use records that the named LBRegistrar's API key reads refs, and drops the
// values no LBRegistrar reads any more.
func (s *Secrets) use(resource string, refs []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ref := range refs {
		s.readers[ref]++
	}
	for _, ref := range s.uses[resource] {
		if s.readers[ref]--; s.readers[ref] == 0 {
			delete(s.readers, ref)
			delete(s.values, ref)
		}
	}
	if len(refs) == 0 {
		delete(s.uses, resource)
	} else {
		s.uses[resource] = refs
	}
}

// Forget drops what the named LBRegistrar, now gone, read.
func (s *Secrets) Forget(resource string) { s.use(resource, nil) }

// valueRef names one Secret value as namespace/name/key.
func valueRef(src *v1beta1.SecretKeySource) string {
	return src.Namespace + "/" + src.SecretKeyRef.Name + "/" + src.SecretKeyRef.Key
}

// Builders build OCI clients of type C.
type Builders[C any] struct {
	// Key builds a client signing with an API key.
	Key func(oci.Credentials) (C, error)
	// Session builds a client signing in as identity (a name no other
	// identity has) in region, with the provider newProvider builds, and
	// caches it: the provider renews its session itself.
	Session func(identity, region string, newProvider func() (common.ConfigurationProvider, error)) (C, error)
	// WorkloadIdentity reaches OKE workload identity; nil where it cannot
	// be reached (lbregistrar plan outside the cluster).
	WorkloadIdentity *WorkloadIdentity
}

// ClientFor builds with b the OCI client for the identity spec names for
// the named LBRegistrar: its API key, read from its Secrets through s, or
// the workload identity of the ServiceAccount it names.
func ClientFor[C any](ctx context.Context, s *Secrets, b Builders[C], resource string, spec *v1beta1.LBRegistrarSpec) (C, error) {
	var none C
	switch w := spec.WorkloadIdentity; {
	case spec.APIKey != nil:
		creds, err := s.Credentials(ctx, resource, spec.APIKey)
		if err != nil {
			return none, err
		}
		return Client(b.Key, creds)
	case w != nil && w.ServiceAccount != nil && b.WorkloadIdentity != nil && b.Session != nil:
		return sessionClient(b, b.WorkloadIdentity.signIn(w.ServiceAccount), w.Region)
	case w != nil && w.ServiceAccount != nil:
		return none, &Error{Reason: reasonIdentityUnsupported, Message: "spec.workloadIdentity: OKE workload identity is reached only from inside the cluster"}
	}
	return none, &Error{Reason: reasonIdentityUnsupported, Message: keylessField(spec) + ": this version of lbregistrar signs in to OCI with spec.apiKey or spec.workloadIdentity.serviceAccount only"}
}

// keylessField is the field of the identity spec names instead of an API key.
func keylessField(spec *v1beta1.LBRegistrarSpec) string {
	switch {
	case spec.WorkloadIdentity != nil:
		return "spec.workloadIdentity"
	case spec.InstancePrincipal != nil:
		return "spec.instancePrincipal"
	}
	return "spec.apiKey"
}

// Client builds the OCI client for creds with build; a key that cannot be
// used is an *Error, the user's to fix.
func Client[C any](build func(oci.Credentials) (C, error), creds oci.Credentials) (C, error) {
	ociClient, err := build(creds)
	var none C
	switch {
	case errors.Is(err, oci.ErrInvalidCredentials):
		return none, &Error{Reason: reasonInvalidCredentials, Message: "spec.apiKey: " + err.Error()}
	case err != nil:
		return none, err
	}
	return ociClient, nil
}
