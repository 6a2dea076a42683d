package credentials

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"github.com/oracle/oci-go-sdk/v65/common"
	"github.com/oracle/oci-go-sdk/v65/common/auth"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/reconciler/oci"
)

// signingIn is the error of a sign-in still under way (oci.ErrSigningIn),
// tried again soon.
func signingIn(field string, err error) *Error {
	return &Error{Reason: v1beta1.ReasonSigningIn, Message: field + ": signing in to OCI, which is taking a while; trying again soon", Cause: err, Retry: true}
}

// WorkloadIdentity signs resources in to OCI with OKE workload identity as
// the ServiceAccount each names: the controller requests a short-lived
// token for it (TokenRequest) and the SDK exchanges it at OKE's proxy for
// an OCI session, which it renews. No token is logged or kept past its use.
type WorkloadIdentity struct {
	// Host is where OKE's token exchange listens (the SDK fixes port
	// 12250): in a cluster, the API server's address.
	Host string
	// CA is trusted for the exchange besides the cluster's CA file.
	CA []byte
	// Tokens creates the TokenRequests.
	Tokens client.Client
	// Namespaces are the namespaces ServiceAccounts may be named in, as API
	// key Secrets (serve --secret-namespaces); any when empty.
	Namespaces []string
}

// regionEnv names the region the SDK's workload identity provider reads
// from the environment; lbregistrar's Deployment sets it.
const regionEnv = "OCI_RESOURCE_PRINCIPAL_REGION"

var errNoRegionEnv = errors.New("the controller's environment lacks " + regionEnv + ", which the OCI SDK needs for workload identity: set it in its Deployment (Helm value workloadIdentityRegion)")

// tokenLifetime is how long a requested ServiceAccount token lives; the SDK
// refuses one that expires within five minutes, and TokenRequest's least
// is ten.
const tokenLifetime = time.Hour

// signIn is how to build a session as a ServiceAccount, which field names.
type signIn struct {
	field, identity string
	provider        *tokenProvider
	newProvider     func() (common.ConfigurationProvider, error)
}

func (w *WorkloadIdentity) signIn(field string, sa client.ObjectKey) signIn {
	in := signIn{field: field, identity: "workload-identity/" + sa.String()}
	in.provider = &tokenProvider{tokens: w.Tokens, sa: sa}
	host := w.Host
	in.newProvider = func() (common.ConfigurationProvider, error) {
		// The SDK insists on it, though each client is then pointed at its
		// resource's region.
		if os.Getenv(regionEnv) == "" {
			return nil, errNoRegionEnv
		}
		provider, err := auth.OkeWorkloadIdentityConfigurationProviderWithServiceAccountTokenProviderK8sService(&host, in.provider, w.CA)
		if err == nil {
			_, err = provider.KeyID() // signs in now: its failure is this build's
		}
		if tokenErr := in.provider.lastErr(); err != nil && tokenErr != nil {
			// The SDK's error does not wrap ours; the sign-in may end
			// after the caller who started it stopped waiting, and its
			// error reaches another.
			return nil, &tokenError{sdk: err, token: tokenErr}
		}
		return provider, err
	}
	return in
}

// tokenError is a sign-in that failed because the ServiceAccount's token
// could not be had.
type tokenError struct{ sdk, token error }

func (e *tokenError) Error() string   { return e.sdk.Error() }
func (e *tokenError) Unwrap() []error { return []error{e.sdk, e.token} }

// sessionClient builds the client in signs in with, in region; a failure is
// an *Error naming the field.
func sessionClient[C any](b Builders[C], in signIn, region string) (C, error) {
	var none C
	cl, err := b.Session(in.identity, region, in.newProvider)
	var netErr net.Error
	switch {
	case err == nil:
		return cl, nil
	case errors.Is(err, oci.ErrSigningIn):
		return none, signingIn(in.field, err)
	case errors.As(err, &netErr):
		return none, err // not the user's to fix: retried
	}
	reason, msg := v1beta1.ReasonSignInFailed, in.field+": OCI refused the sign-in (OKE workload identity's token exchange)"
	var te *tokenError
	switch {
	case errors.Is(err, errNoRegionEnv):
		reason, msg = v1beta1.ReasonRegionNotSet, in.field+": "+err.Error()
	case !errors.As(err, &te):
	case apierrors.IsNotFound(te.token):
		reason, msg = v1beta1.ReasonServiceAccountNotFound, fmt.Sprintf("%s: ServiceAccount %s not found: create it, or name another", in.field, in.provider.sa)
	case apierrors.IsForbidden(te.token):
		reason, msg = v1beta1.ReasonServiceAccountNotListed, fmt.Sprintf(
			"%s: lbregistrar may not request tokens for ServiceAccount %s: list it in the Role lbregistrar-workload-identity of namespace %s (Helm value workloadIdentityServiceAccounts, or config/workload-identity)",
			in.field, in.provider.sa, in.provider.sa.Namespace)
	default:
		reason, msg = v1beta1.ReasonCredentialReadError, fmt.Sprintf("%s: no token for ServiceAccount %s: %s", in.field, in.provider.sa, apierrors.ReasonForError(te.token))
	}
	// None of these is seen by a watch: a ServiceAccount or Role created,
	// the Deployment's environment set, the exchange back.
	return none, &Error{Reason: reason, Message: msg, Cause: err, Retry: true}
}

// tokenProvider gives the SDK a token of one ServiceAccount, requested
// when the SDK asks (it does when it renews its session).
type tokenProvider struct {
	tokens client.Client
	sa     client.ObjectKey

	mu  sync.Mutex
	err error
}

func (p *tokenProvider) ServiceAccountToken() (string, error) {
	// The SDK asks when it renews its session, outside any reconcile.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(tokenLifetime / time.Second))}}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: p.sa.Namespace, Name: p.sa.Name}}
	err := p.tokens.SubResource("token").Create(ctx, sa, req)
	p.mu.Lock()
	p.err = err
	p.mu.Unlock()
	if err != nil {
		return "", fmt.Errorf("requesting a token for ServiceAccount %s: %w", p.sa, err)
	}
	return req.Status.Token, nil
}

func (p *tokenProvider) lastErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// instancePrincipal builds the client that signs in as the instance the
// controller runs on, in region. Off OCI the SDK asks the metadata service
// for about two minutes before it gives up; meanwhile the resource is
// SigningIn.
func instancePrincipal[C any](b Builders[C], region string) (C, error) {
	cl, err := b.Session("instance-principal", region, func() (common.ConfigurationProvider, error) {
		return auth.InstancePrincipalConfigurationProviderWithCustomClient(b.InstanceDispatcher)
	})
	var none C
	switch {
	case errors.Is(err, oci.ErrSigningIn):
		return none, signingIn("spec.instancePrincipal", err)
	case err != nil:
		return none, &Error{Reason: v1beta1.ReasonSignInFailed, Message: "spec.instancePrincipal: OCI refused the sign-in as the instance the controller runs on", Cause: err, Retry: true}
	}
	return cl, nil
}
