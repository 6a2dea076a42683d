package ociemu

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/oracle/oci-go-sdk/v65/common"
)

// Instance principals, as oci-go-sdk's InstancePrincipalConfigurationProvider*
// use them (common/auth/instance_principal_key_provider.go,
// federation_client.go): the instance metadata service
// (http://169.254.169.254/opc/v2, with "Authorization: Bearer Oracle")
// gives the region (instance/region), and a leaf certificate naming the
// tenancy (subject "opc-tenant:<ocid>"), its private key and an
// intermediate certificate (identity/cert.pem, key.pem, intermediate.pem).
// The SDK POSTs them with a fresh session public key to the auth service's
// v1/x509, signed by the leaf key with keyId
// "<tenancy>/fed-x509-sha256/<SHA-256 fingerprint of the leaf>" over date,
// (request-target) and the body headers; the answer {"token": "<jwt>"}
// signs requests as keyId "ST$<jwt>".

// metadataHost is the instance metadata service's address, which the SDK
// fixes (it can be changed only through the process environment).
const metadataHost = "169.254.169.254"

// instanceCert is an instance's identity: its leaf certificate's DER and
// public key.
type instanceCert struct {
	instance string
	der      []byte
	key      *rsa.PublicKey
}

// InstancePrincipal makes instance, an instance OCID, known to the
// emulator's metadata and auth services, and returns the dispatcher
// modifier to give the SDK's InstancePrincipalConfigurationProviderWithCustomClient:
// its requests to the metadata service and the auth service are answered
// in process, and any other is refused without dialing, so nothing leaves
// the machine. Requests signed with the sessions it gets name instance as
// their principal.
func (e *Emulator) InstancePrincipal(instance string) (func(common.HTTPRequestDispatcher) (common.HTTPRequestDispatcher, error), error) {
	metadata, auth, err := e.instanceServices(instance)
	if err != nil {
		return nil, err
	}
	dispatcher := inProcess{metadata: metadata, auth: auth}
	return func(common.HTTPRequestDispatcher) (common.HTTPRequestDispatcher, error) { return dispatcher, nil }, nil
}

// ServeInstancePrincipal is InstancePrincipal for another process, one
// that cannot be given a dispatcher: the metadata and auth services are
// served on a listener of their own on 127.0.0.1, in plain HTTP as the
// metadata service is, and env is what points the SDK at them (it reads
// OCI_METADATA_BASE_URL and OCI_SDK_AUTH_CLIENT_REGION_URL).
func (e *Emulator) ServeInstancePrincipal(instance string) (env []string, err error) {
	metadata, auth, err := e.instanceServices(instance)
	if err != nil {
		return nil, err
	}
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/opc/v2/", metadata)
	mux.Handle("/v1/", auth)
	e.serveIdentity(listener, mux, nil)
	base := "http://" + listener.Addr().String()
	return []string{"OCI_METADATA_BASE_URL=" + base + "/opc/v2", "OCI_SDK_AUTH_CLIENT_REGION_URL=" + base}, nil
}

// instanceServices issues instance a leaf certificate and returns the
// metadata service that hands it out and the auth service that federates
// it.
func (e *Emulator) instanceServices(instance string) (metadata, auth http.Handler, err error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	template := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: instance, OrganizationalUnit: []string{"opc-instance:" + instance, "opc-tenant:" + SessionTenancy}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, template, e.ca.cert, &key.PublicKey, e.ca.key)
	if err != nil {
		return nil, nil, err
	}
	e.mu.Lock()
	e.instances[certFingerprint(der)] = &instanceCert{instance: instance, der: der, key: &key.PublicKey}
	e.mu.Unlock()

	files := map[string][]byte{
		"/opc/v2/instance/region":           []byte(e.opts.Region),
		"/opc/v2/identity/cert.pem":         pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		"/opc/v2/identity/key.pem":          pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}),
		"/opc/v2/identity/intermediate.pem": e.ca.certPEM,
	}
	metadata = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch body, ok := files[r.URL.Path]; {
		case r.Header.Get("Authorization") != "Bearer Oracle":
			http.Error(w, "the v2 metadata service wants Authorization: Bearer Oracle", http.StatusUnauthorized)
		case !ok || r.Method != http.MethodGet:
			http.NotFound(w, r)
		default:
			_, _ = w.Write(body) // a client gone is its own business
		}
	})
	federation := http.NewServeMux()
	federation.HandleFunc("POST /v1/x509", e.federate)
	return metadata, federation, nil
}

// inProcess answers requests in process, never dialing: the metadata
// service by its address, the auth service by any auth.<region> host.
type inProcess struct{ metadata, auth http.Handler }

func (d inProcess) Do(req *http.Request) (*http.Response, error) {
	var handler http.Handler
	switch host := req.URL.Hostname(); {
	case host == metadataHost:
		handler = d.metadata
	case strings.HasPrefix(host, "auth."):
		handler = d.auth
	default:
		return nil, fmt.Errorf("ociemu: the instance principal dispatcher answers only the metadata and auth services, not %s", host)
	}
	// As a server would see it.
	served := req.Clone(req.Context())
	served.RequestURI, served.Host = req.URL.RequestURI(), req.URL.Host
	rec := httptest.NewRecorder()
	handler.ServeHTTP(rec, served)
	resp := rec.Result()
	resp.Request = req // the SDK reads it on errors
	return resp, nil
}

// federate is the auth service's x509 federation: a request signed by a
// leaf certificate the emulator issued, presenting that certificate, gets
// a session for the public key it sends.
func (e *Emulator) federate(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	now := time.Now()
	var leaf *instanceCert
	_, err = verify(r, body, now, e.opts.MaxClockSkew, func(keyID string, _ time.Time) (*signer, error) {
		tenancy, fingerprint, ok := strings.Cut(keyID, "/fed-x509-sha256/")
		e.mu.Lock()
		leaf = e.instances[fingerprint]
		e.mu.Unlock()
		if !ok || tenancy != SessionTenancy || leaf == nil {
			return nil, errNotAuthenticated{"unknown instance certificate " + keyID}
		}
		return &signer{key: leaf.key, principal: leaf.instance}, nil
	})
	if err != nil {
		http.Error(w, `{"code":"NotAuthenticated","message":"`+err.Error()+`"}`, http.StatusUnauthorized)
		return
	}
	var details struct {
		Certificate string `json:"certificate"`
		PublicKey   string `json:"publicKey"`
	}
	if err := json.Unmarshal(body, &details); err != nil {
		http.Error(w, `{"code":"InvalidParameter","message":"body"}`, http.StatusBadRequest)
		return
	}
	presented, err := base64.StdEncoding.DecodeString(details.Certificate)
	if err != nil || string(presented) != string(leaf.der) {
		http.Error(w, `{"code":"NotAuthenticated","message":"the certificate is not the signer's"}`, http.StatusUnauthorized)
		return
	}
	key, err := parseRSAPublicKey(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: base64OrEmpty(details.PublicKey)}))
	if err != nil {
		http.Error(w, `{"code":"InvalidParameter","message":"publicKey"}`, http.StatusBadRequest)
		return
	}
	token, err := e.issueSession(leaf.instance, key, now)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]string{"token": token}) // a client gone is its own business
}

// base64OrEmpty is s decoded, or nothing, which no key parses from.
func base64OrEmpty(s string) []byte {
	b, _ := base64.StdEncoding.DecodeString(s)
	return b
}

// certFingerprint is the SDK's fingerprint of a certificate: SHA-256 of its
// DER as colon-separated hex.
func certFingerprint(der []byte) string {
	sum := sha256.Sum256(der)
	parts := make([]string, len(sum))
	for i, b := range sum {
		parts[i] = fmt.Sprintf("%02x", b)
	}
	return strings.Join(parts, ":")
}
