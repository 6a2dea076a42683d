package ociemu_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/oracle/oci-go-sdk/v65/common"
	"github.com/oracle/oci-go-sdk/v65/common/auth"
	"github.com/oracle/oci-go-sdk/v65/loadbalancer"

	"github.com/peppy-ratio/lbregistrar/test/ociemu"
)

// serviceAccountToken is a Kubernetes-like token: a JWT with an exp, which
// the SDK checks before presenting it.
func serviceAccountToken(t *testing.T, subject string) string {
	t.Helper()
	enc := base64.RawURLEncoding
	claims, err := json.Marshal(map[string]any{"sub": subject, "exp": time.Now().Add(time.Hour).Unix()})
	if err != nil {
		t.Fatal(err)
	}
	return enc.EncodeToString([]byte(`{"alg":"RS256"}`)) + "." + enc.EncodeToString(claims) + ".c2ln"
}

type suppliedToken string

func (s suppliedToken) ServiceAccountToken() (string, error) { return string(s), nil }

// workloadIdentityProvider is the SDK's OKE workload identity provider
// exchanging token at the emulator's host. The SDK reads the region and
// the cluster CA's path from the environment.
func workloadIdentityProvider(t *testing.T, emu *ociemu.Emulator, host, token string) common.ConfigurationProvider {
	t.Helper()
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(caFile, emu.CACertPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("OCI_KUBERNETES_SERVICE_ACCOUNT_CERT_PATH", caFile)
	t.Setenv("OCI_RESOURCE_PRINCIPAL_REGION", "us-ashburn-1")
	provider, err := auth.OkeWorkloadIdentityConfigurationProviderWithServiceAccountTokenProviderK8sService(&host, suppliedToken(token), emu.CACertPEM())
	if err != nil {
		t.Fatal(err)
	}
	return provider
}

// A service account token the cluster vouches for is exchanged for a
// session token, which signs requests until it expires; the emulator
// records the service account as the principal. A token the cluster does
// not know gets no session, and a session token the emulator did not
// issue signs nothing.
func TestWorkloadIdentitySession(t *testing.T) {
	f := newFixture(t, ociemu.Options{SessionTokenLifetime: time.Hour}, false)
	good := serviceAccountToken(t, "lb-writer")
	host, err := f.emu.ServeWorkloadIdentity(func(_ context.Context, token string) (string, error) {
		if token != good {
			return "", errors.New("unknown token")
		}
		return "system:serviceaccount:team-a:lb-writer", nil
	})
	if err != nil {
		t.Fatal(err)
	}

	lb, _ := f.clients(t, workloadIdentityProvider(t, f.emu, host, good))
	if _, err := lb.GetBackendSet(f.context, loadbalancer.GetBackendSetRequest{LoadBalancerId: common.String(classicID), BackendSetName: common.String("web")}); err != nil {
		t.Fatal(err)
	}
	calls := f.emu.Calls()
	if got := calls[len(calls)-1].Principal; got != "system:serviceaccount:team-a:lb-writer" {
		t.Errorf("principal = %q, want the service account", got)
	}
	if got := f.emu.Counters().SessionTokens; got != 1 {
		t.Errorf("session tokens issued = %d, want 1", got)
	}

	// The SDK exchanges the token as it builds a client.
	if _, err := loadbalancer.NewLoadBalancerClientWithConfigurationProvider(workloadIdentityProvider(t, f.emu, host, serviceAccountToken(t, "someone"))); err == nil {
		t.Error("a service account token the cluster does not vouch for got a session")
	}

	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	stranger, _ := f.clients(t, forgedSession{key})
	_, err = stranger.GetBackendSet(f.context, loadbalancer.GetBackendSetRequest{LoadBalancerId: common.String(classicID), BackendSetName: common.String("web")})
	serviceError(t, err, 401, "NotAuthenticated")

	f.emu.ExpireSessions("system:serviceaccount:team-a:lb-writer")
	_, err = lb.GetBackendSet(f.context, loadbalancer.GetBackendSetRequest{LoadBalancerId: common.String(classicID), BackendSetName: common.String("web")})
	serviceError(t, err, 401, "NotAuthenticated")
	calls = f.emu.Calls()
	if got := calls[len(calls)-1].AuthError; got != "session token of system:serviceaccount:team-a:lb-writer expired" {
		t.Errorf("auth error = %q", got)
	}
}

// forgedSession signs with a session token the emulator never issued.
type forgedSession struct{ key *rsa.PrivateKey }

func (f forgedSession) PrivateRSAKey() (*rsa.PrivateKey, error) { return f.key, nil }
func (forgedSession) KeyID() (string, error) {
	enc := base64.RawURLEncoding
	return "ST$" + enc.EncodeToString([]byte(`{"alg":"HS256"}`)) + "." + enc.EncodeToString([]byte(`{"exp":4102444800}`)) + ".Zm9yZ2Vk", nil
}
func (forgedSession) TenancyOCID() (string, error)    { return ociemu.SessionTenancy, nil }
func (forgedSession) UserOCID() (string, error)       { return "", nil }
func (forgedSession) KeyFingerprint() (string, error) { return "", nil }
func (forgedSession) Region() (string, error)         { return "us-ashburn-1", nil }
func (forgedSession) AuthType() (common.AuthConfig, error) {
	return common.AuthConfig{AuthType: common.UnknownAuthenticationType}, nil
}

// The SDK's instance principal provider, its metadata and auth service
// calls answered in process by the emulator, signs in as the instance:
// requests are signed by the session it gets and name the instance; the
// dispatcher dials nothing else.
func TestInstancePrincipalSession(t *testing.T) {
	f := newFixture(t, ociemu.Options{}, false)
	const instance = "ocid1.instance.oc1.iad.emulated"
	dispatcher, err := f.emu.InstancePrincipal(instance)
	if err != nil {
		t.Fatal(err)
	}
	provider, err := auth.InstancePrincipalConfigurationProviderWithCustomClient(dispatcher)
	if err != nil {
		t.Fatal(err)
	}
	f.signsInAs(t, provider, instance)

	d, err := dispatcher(nil)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, "http://192.0.2.1/opc/v2/instance/region", nil)
	if _, err := d.Do(req); err == nil {
		t.Error("the dispatcher answered for another host")
	}
}

// ServeInstancePrincipal answers the SDK's own instance principal provider,
// without a custom client, where the SDK's environment variables point.
func TestServeInstancePrincipal(t *testing.T) {
	f := newFixture(t, ociemu.Options{}, false)
	const instance = "ocid1.instance.oc1.iad.served"
	env, err := f.emu.ServeInstancePrincipal(instance)
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(v, "http://127.0.0.1:") {
			t.Fatalf("%s points off loopback", kv)
		}
		t.Setenv(k, v)
	}
	provider, err := auth.InstancePrincipalConfigurationProvider()
	if err != nil {
		t.Fatal(err)
	}
	f.signsInAs(t, provider, instance)
}

// signsInAs reads a backend set signed by provider and checks the emulator
// took the request for principal's.
func (f *fixture) signsInAs(t *testing.T, provider common.ConfigurationProvider, principal string) {
	t.Helper()
	lb, _ := f.clients(t, provider)
	if _, err := lb.GetBackendSet(f.context, loadbalancer.GetBackendSetRequest{LoadBalancerId: common.String(classicID), BackendSetName: common.String("web")}); err != nil {
		t.Fatal(err)
	}
	calls := f.emu.Calls()
	if got := calls[len(calls)-1].Principal; got != principal {
		t.Errorf("principal = %q, want %q", got, principal)
	}
}
