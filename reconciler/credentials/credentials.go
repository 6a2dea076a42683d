// Package credentials gives each resource the identity its OCI calls are
// signed with: the API key its Secrets contain, the OKE workload identity of a
// ServiceAccount (whose tokens it requests), or the controller's own
// (its ServiceAccount's, or its instance principal). Key material and
// tokens are read from the API server, never from an informer, kept only
// while used, and never logged or put in a condition: a problem a user can
// fix is an *Error, whose message names the field and never contains a key.
//
// It reads Secrets and creates ServiceAccount tokens; it writes nothing else.
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

	"github.com/peppy-ratio/lbregistrar/api/v1alpha1"
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
		return nil, &Error{Reason: v1beta1.ReasonSecretNamespaceNotAllowed, Message: fmt.Sprintf(
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
	missing := &Error{Reason: v1beta1.ReasonSecretNotFound, Message: fmt.Sprintf("%s: Secret %s has no key %q, or does not exist", field, name, src.SecretKeyRef.Key)}
	var secret corev1.Secret
	if err := s.uncached.Get(ctx, name, &secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, missing
		}
		return nil, &Error{Reason: v1beta1.ReasonCredentialReadError, Cause: err,
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
	// AllowController lets resources sign in as the controller itself:
	// ControllerUser, who it runs as, when that is a ServiceAccount (named
	// or not), or the instance it runs on. InstanceDispatcher, when set, answers the
	// instance principal provider's calls (tests); nil reaches the
	// instance metadata service.
	AllowController    bool
	ControllerUser     string
	InstanceDispatcher func(common.HTTPRequestDispatcher) (common.HTTPRequestDispatcher, error)
}

// ClientFor builds with b the OCI client for the identity obj's spec
// names: its API key, read from its Secrets through s; the workload
// identity of the ServiceAccount it names; or, where b allows it, the
// controller's own (its ServiceAccount's workload identity, or the
// instance principal of the node it runs on). An identity no admission
// check may have seen is not used (UncheckedIdentity).
func ClientFor[C any](ctx context.Context, s *Secrets, b Builders[C], obj *v1beta1.LBRegistrar) (C, error) {
	var none C
	if err := UncheckedIdentity(obj); err != nil {
		return none, err
	}
	spec := &obj.Spec
	w := spec.WorkloadIdentity
	keyless, asController := keylessField(spec), validation.ControllerIdentity(spec, b.ControllerUser)
	switch {
	case spec.APIKey != nil:
		creds, err := s.Credentials(ctx, obj.Name, spec.APIKey)
		if err != nil {
			return none, err
		}
		return Client(b.Key, creds)
	case keyless == "":
		return none, &Error{Reason: v1beta1.ReasonIdentityUnsupported, Message: "spec.apiKey: the spec names no identity to sign in to OCI with"}
	case b.Session == nil || w != nil && b.WorkloadIdentity == nil:
		return none, &Error{Reason: v1beta1.ReasonIdentityUnsupported, Message: keyless + ": only the controller, in the cluster, signs in this way"}
	case asController != nil && !b.AllowController:
		return none, &Error{Reason: v1beta1.ReasonControllerIdentityNotAllowed, Message: asController.String() + ": lbregistrar serve does not let resources sign in as the controller itself (--allow-controller-identity)"}
	case spec.InstancePrincipal != nil:
		return instancePrincipal(b, spec.InstancePrincipal.Region)
	case asController != nil:
		sa, ok := validation.ServiceAccountOf(b.ControllerUser)
		if !ok {
			return none, &Error{Reason: v1beta1.ReasonSignInFailed, Message: fmt.Sprintf("%s: the controller runs as %q, not as a ServiceAccount, so it has no workload identity; name a serviceAccount", keyless, b.ControllerUser)}
		}
		return sessionClient(b, b.WorkloadIdentity.signIn(asController.String(), sa), w.Region)
	}
	sa := client.ObjectKey{Namespace: w.ServiceAccount.Namespace, Name: w.ServiceAccount.Name}
	if !validation.SecretNamespaceAllowed(sa.Namespace, b.WorkloadIdentity.Namespaces) {
		return none, &Error{Reason: v1beta1.ReasonServiceAccountNamespace, Message: fmt.Sprintf(
			"%s.serviceAccount: ServiceAccount %s is outside the namespaces lbregistrar signs in from; add its namespace to lbregistrar serve --secret-namespaces", keyless, sa)}
	}
	return sessionClient(b, b.WorkloadIdentity.signIn(keyless+".serviceAccount", sa), w.Region)
}

// UncheckedIdentity is an *Error when obj signs in with an identity no
// admission check may have seen (validation.UncheckedIdentity): one
// conversion took from the v1alpha1 annotation, where an object stored
// before lbregistrar was installed could put any. Nil otherwise.
func UncheckedIdentity(obj *v1beta1.LBRegistrar) error {
	field := validation.UncheckedIdentity(obj.Annotations, &obj.Spec)
	if field == nil {
		return nil
	}
	return &Error{Reason: v1beta1.ReasonUncheckedIdentity, Message: fmt.Sprintf(
		"%s: the %s came from the %s annotation, which no admission check saw (an object stored before lbregistrar was installed, or written through v1alpha1), so it is not used; someone allowed to use it may remove the annotation %s",
		field, obj.Spec.Identity(), v1alpha1.HubDataAnnotation, v1alpha1.UncheckedIdentityAnnotation)}
}

// keylessField is the field of the identity spec names instead of an API
// key; empty when it names none.
func keylessField(spec *v1beta1.LBRegistrarSpec) string {
	switch {
	case spec.WorkloadIdentity != nil:
		return "spec.workloadIdentity"
	case spec.InstancePrincipal != nil:
		return "spec.instancePrincipal"
	}
	return ""
}

// Client builds the OCI client for creds with build; a key that cannot be
// used is an *Error, the user's to fix.
func Client[C any](build func(oci.Credentials) (C, error), creds oci.Credentials) (C, error) {
	ociClient, err := build(creds)
	var none C
	switch {
	case errors.Is(err, oci.ErrInvalidCredentials):
		return none, &Error{Reason: v1beta1.ReasonInvalidCredentials, Message: "spec.apiKey: " + err.Error()}
	case err != nil:
		return none, err
	}
	return ociClient, nil
}
