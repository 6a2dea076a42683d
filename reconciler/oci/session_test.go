package oci_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/oracle/oci-go-sdk/v65/common"
	"github.com/oracle/oci-go-sdk/v65/common/auth"

	"github.com/peppy-ratio/lbregistrar/reconciler/oci"
	"github.com/peppy-ratio/lbregistrar/test/ociemu"
)

// A session the SDK renews about every half second, used by several
// requests at once for some seconds: every request is signed with a key
// and its own token, so OCI refuses none.
func TestSessionRenewedUnderConcurrentRequests(t *testing.T) {
	emu := ociemu.StartSeeded(t, "../testdata/seed.yaml", ociemu.Options{SessionTokenLifetime: 5*time.Minute + time.Second})
	host, err := emu.ServeWorkloadIdentity(func(context.Context, string) (string, error) {
		return "system:serviceaccount:team-a:lb-writer", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(caFile, emu.CACertPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("OCI_KUBERNETES_SERVICE_ACCOUNT_CERT_PATH", caFile)
	t.Setenv("OCI_RESOURCE_PRINCIPAL_REGION", "us-ashburn-1")
	f := oci.NewFactory(oci.Options{LoadBalancerEndpoint: emu.URL(), NetworkLoadBalancerEndpoint: emu.URL(), CoreEndpoint: emu.URL(), RateLimit: 1000, Burst: 1000})
	c, err := f.SessionClient("workload-identity/team-a/lb-writer", "us-ashburn-1", func() (common.ConfigurationProvider, error) {
		return auth.OkeWorkloadIdentityConfigurationProviderWithServiceAccountTokenProviderK8sService(&host, serviceAccountToken{}, emu.CACertPEM())
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	until := time.Now().Add(3 * time.Second)
	for range 8 {
		wg.Go(func() {
			for time.Now().Before(until) {
				_, _ = c.GetBackendSet(ctx, lbID, setOf(lbID)) // what the calls cost is counted, not what they answer
			}
		})
	}
	wg.Wait()
	if n := emu.Counters().SessionTokens; n < 3 {
		t.Errorf("%d sessions issued, want renewals during the test", n)
	}
	var refused []string
	calls := 0
	for _, call := range emu.Calls() {
		if call.Operation == "GetBackendSet" {
			calls++
			if call.Status == 401 {
				refused = append(refused, call.AuthError)
			}
		}
	}
	if len(refused) > 0 {
		t.Errorf("%d of %d requests refused, the first: %s", len(refused), calls, refused[0])
	}
}

// serviceAccountToken is a token shaped as a ServiceAccount's (a JWT with
// an expiry the SDK checks); the test's reviewer vouches for any.
type serviceAccountToken struct{}

func (serviceAccountToken) ServiceAccountToken() (string, error) {
	enc := base64.RawURLEncoding
	claims, err := json.Marshal(map[string]any{"sub": "lb-writer", "exp": time.Now().Add(time.Hour).Unix()})
	return enc.EncodeToString([]byte(`{"alg":"RS256"}`)) + "." + enc.EncodeToString(claims) + ".c2ln", err
}
