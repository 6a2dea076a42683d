package ociemu_test

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/oracle/oci-go-sdk/v65/common"
	"github.com/oracle/oci-go-sdk/v65/loadbalancer"
	"github.com/oracle/oci-go-sdk/v65/networkloadbalancer"

	"github.com/peppy-ratio/lbregistrar/test/ociemu"
)

type dispatcherFunc func(*http.Request) (*http.Response, error)

func (d dispatcherFunc) Do(r *http.Request) (*http.Response, error) { return d(r) }

type signerFunc func(*http.Request) error

func (s signerFunc) Sign(r *http.Request) error { return s(r) }

func newKey(t *testing.T) (*rsa.PrivateKey, string) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	must(t, err)
	return key, string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}))
}

func TestSignatureIsVerified(t *testing.T) {
	transports(t, ociemu.Options{}, func(t *testing.T, f *fixture) {
		getLB := func(lb loadbalancer.LoadBalancerClient) error {
			_, err := lb.GetLoadBalancer(f.context, loadbalancer.GetLoadBalancerRequest{LoadBalancerId: common.String(classicID)})
			return err
		}
		getNLB := func(nlb networkloadbalancer.NetworkLoadBalancerClient) error {
			_, err := nlb.GetNetworkLoadBalancer(f.context, networkloadbalancer.GetNetworkLoadBalancerRequest{NetworkLoadBalancerId: common.String(networkID)})
			return err
		}
		tenancy, _ := f.config.TenancyOCID()
		user, _ := f.config.UserOCID()
		fingerprint, _ := f.config.KeyFingerprint()
		_, otherKey := newKey(t)

		t.Run("unsigned", func(t *testing.T) {
			lb, nlb := f.clients(t, f.config)
			lb.Signer = signerFunc(func(*http.Request) error { return nil })
			nlb.Signer = lb.Signer
			serviceError(t, getLB(lb), 401, "NotAuthenticated")
			serviceError(t, getNLB(nlb), 401, "NotAuthenticated")
		})
		t.Run("unknown key", func(t *testing.T) {
			lb, nlb := f.clients(t, common.NewRawConfigurationProvider(tenancy, "ocid1.user.oc1..stranger", "us-ashburn-1", fingerprint, otherKey, nil))
			serviceError(t, getLB(lb), 401, "NotAuthenticated")
			serviceError(t, getNLB(nlb), 401, "NotAuthenticated")
		})
		t.Run("wrong private key for the keyId", func(t *testing.T) {
			lb, nlb := f.clients(t, common.NewRawConfigurationProvider(tenancy, user, "us-ashburn-1", fingerprint, otherKey, nil))
			serviceError(t, getLB(lb), 401, "NotAuthenticated")
			serviceError(t, getNLB(nlb), 401, "NotAuthenticated")
		})
		t.Run("clock skew", func(t *testing.T) {
			for _, tc := range []struct {
				skew time.Duration
				ok   bool
			}{{-6 * time.Minute, false}, {6 * time.Minute, false}, {-4 * time.Minute, true}, {4 * time.Minute, true}} {
				lb, nlb := f.clients(t, f.config)
				lb.Interceptor = func(r *http.Request) error {
					r.Header.Set("Date", time.Now().Add(tc.skew).UTC().Format(http.TimeFormat))
					return nil
				}
				nlb.Interceptor = lb.Interceptor
				for _, err := range []error{getLB(lb), getNLB(nlb)} {
					if tc.ok {
						must(t, err)
					} else {
						serviceError(t, err, 401, "NotAuthenticated")
					}
				}
			}
		})
		t.Run("body changed after signing", func(t *testing.T) {
			lb, _ := f.clients(t, f.config)
			next := lb.HTTPClient
			lb.HTTPClient = dispatcherFunc(func(r *http.Request) (*http.Response, error) {
				body, _ := io.ReadAll(r.Body)
				body = bytes.Replace(body, []byte("10.0.1.1"), []byte("10.6.6.6"), 1)
				r.Body = io.NopCloser(bytes.NewReader(body))
				return next.Do(r)
			})
			_, err := lb.UpdateBackendSet(f.context, loadbalancer.UpdateBackendSetRequest{LoadBalancerId: common.String(classicID),
				BackendSetName: common.String("web"), UpdateBackendSetDetails: loadbalancer.UpdateBackendSetDetails{
					Policy: common.String("ROUND_ROBIN"), HealthChecker: &loadbalancer.HealthCheckerDetails{Protocol: common.String("TCP")},
					Backends: []loadbalancer.BackendDetails{{IpAddress: common.String("10.0.1.1"), Port: common.Int(80)}}}})
			serviceError(t, err, 401, "NotAuthenticated")
		})
		t.Run("path changed after signing", func(t *testing.T) {
			lb, _ := f.clients(t, f.config)
			next := lb.HTTPClient
			lb.HTTPClient = dispatcherFunc(func(r *http.Request) (*http.Response, error) {
				r.URL.Path = strings.Replace(r.URL.Path, "/web", "/other", 1)
				r.URL.RawPath = ""
				return next.Do(r)
			})
			_, err := lb.GetBackendSet(f.context, loadbalancer.GetBackendSetRequest{LoadBalancerId: common.String(classicID), BackendSetName: common.String("web")})
			serviceError(t, err, 401, "NotAuthenticated")
		})

		var rejected int
		for _, c := range f.emu.Calls() {
			if c.Status == 401 {
				rejected++
				if c.AuthError == "" {
					t.Errorf("401 without a logged reason: %+v", c)
				}
			}
		}
		if rejected != 12 {
			t.Errorf("%d calls rejected, want 12", rejected)
		}
	})
}

// A key kept elsewhere (say in a Kubernetes Secret) is registered by its
// public half and then signs for its tenancy and user.
func TestRegisterExistingPublicKey(t *testing.T) {
	f := newFixture(t, ociemu.Options{}, true)
	key, keyPEM := newKey(t)
	pubDER, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	must(t, err)
	user, err := f.emu.RegisterPublicKey("ocid1.tenancy.oc1..mine", "ocid1.user.oc1..me",
		pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}))
	must(t, err)
	wantFingerprint, err := ociemu.Fingerprint(&key.PublicKey)
	must(t, err)
	if user.Fingerprint != wantFingerprint || user.KeyID() != "ocid1.tenancy.oc1..mine/ocid1.user.oc1..me/"+wantFingerprint {
		t.Fatalf("registered %+v", user)
	}
	lb, _ := f.clients(t, common.NewRawConfigurationProvider(user.Tenancy, user.User, "eu-frankfurt-1", user.Fingerprint, keyPEM, nil))
	_, err = lb.GetLoadBalancer(f.context, loadbalancer.GetLoadBalancerRequest{LoadBalancerId: common.String(classicID)})
	must(t, err)

	if _, err := f.emu.RegisterPublicKey("t", "u", []byte("not a key")); err == nil {
		t.Errorf("registering garbage succeeded")
	}
}

// NewAPIKey's private key, as written to an OCI config file (or a Secret),
// signs for the registered user.
func TestNewAPIKeyInAConfigFile(t *testing.T) {
	f := newFixture(t, ociemu.Options{}, false)
	key, err := f.emu.NewAPIKey()
	must(t, err)
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "key.pem")
	must(t, os.WriteFile(keyFile, key.PrivateKeyPEM, 0o600))
	configFile := filepath.Join(dir, "config")
	must(t, os.WriteFile(configFile, []byte("[DEFAULT]\nuser="+key.User.User+"\nfingerprint="+key.Fingerprint+
		"\ntenancy="+key.Tenancy+"\nregion="+key.Region+"\nkey_file="+keyFile+"\n"), 0o600))
	config, err := common.ConfigurationProviderFromFile(configFile, "")
	must(t, err)
	_, nlb := f.clients(t, config)
	_, err = nlb.GetNetworkLoadBalancer(f.context, networkloadbalancer.GetNetworkLoadBalancerRequest{NetworkLoadBalancerId: common.String(networkID)})
	must(t, err)
}
