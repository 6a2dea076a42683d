package ociemu

import (
	"bytes"
	"crypto"
	"crypto/md5"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/oracle/oci-go-sdk/v65/common"
)

// User is an API signing key registered with the emulator.
type User struct {
	Tenancy     string `json:"tenancy"`
	User        string `json:"user"`
	Fingerprint string `json:"fingerprint"`
}

// KeyID is the keyId the SDK puts into the Authorization header.
func (u User) KeyID() string { return u.Tenancy + "/" + u.User + "/" + u.Fingerprint }

// Fingerprint is OCI's fingerprint of a public key: the MD5 of its DER
// (SubjectPublicKeyInfo) encoding as colon-separated hex.
func Fingerprint(key *rsa.PublicKey) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(key)
	if err != nil {
		return "", err
	}
	sum := md5.Sum(der)
	parts := make([]string, len(sum))
	for i, b := range sum {
		parts[i] = fmt.Sprintf("%02x", b)
	}
	return strings.Join(parts, ":"), nil
}

// RegisterPublicKey registers an RSA public key (PEM, PKIX or PKCS#1) for
// tenancy/user, as uploading an API key to a user does, and returns the user
// with the key's fingerprint.
func (e *Emulator) RegisterPublicKey(tenancy, user string, publicKeyPEM []byte) (User, error) {
	key, err := parseRSAPublicKey(publicKeyPEM)
	if err != nil {
		return User{}, err
	}
	return e.registerKey(tenancy, user, key)
}

func (e *Emulator) registerKey(tenancy, user string, key *rsa.PublicKey) (User, error) {
	if tenancy == "" || user == "" {
		return User{}, errors.New("tenancy and user must not be empty")
	}
	fp, err := Fingerprint(key)
	if err != nil {
		return User{}, err
	}
	u := User{Tenancy: tenancy, User: user, Fingerprint: fp}
	e.mu.Lock()
	e.keys[u.KeyID()] = &signer{key: key, principal: user}
	e.mu.Unlock()
	return u, nil
}

// APIKey is a registered API signing key with its private half, in the
// forms an OCI config file or a Kubernetes Secret contains.
type APIKey struct {
	User
	Region        string
	PrivateKeyPEM []byte // PKCS#1, unencrypted
}

// ConfigurationProvider signs SDK requests with the key.
func (k APIKey) ConfigurationProvider() common.ConfigurationProvider {
	return common.NewRawConfigurationProvider(k.Tenancy, k.User.User, k.Region, k.Fingerprint, string(k.PrivateKeyPEM), nil)
}

// NewAPIKey generates a 2048-bit RSA key for a new tenancy and user and
// registers its public half.
func (e *Emulator) NewAPIKey() (APIKey, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return APIKey{}, err
	}
	u, err := e.registerKey(newOCID("tenancy", ""), newOCID("user", ""), &key.PublicKey)
	if err != nil {
		return APIKey{}, err
	}
	return APIKey{
		User:          u,
		Region:        e.opts.Region,
		PrivateKeyPEM: pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}),
	}, nil
}

// NewUser is NewAPIKey returning only the SDK configuration provider.
func (e *Emulator) NewUser() (common.ConfigurationProvider, error) {
	k, err := e.NewAPIKey()
	if err != nil {
		return nil, err
	}
	return k.ConfigurationProvider(), nil
}

func parseRSAPublicKey(data []byte) (*rsa.PublicKey, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, errors.New("public key: no PEM block found")
	}
	if key, err := x509.ParsePKCS1PublicKey(block.Bytes); err == nil {
		return key, nil
	}
	parsed, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("public key: %w", err)
	}
	key, ok := parsed.(*rsa.PublicKey)
	if !ok {
		return nil, fmt.Errorf("public key: %T is not an RSA key", parsed)
	}
	return key, nil
}

// signer is who signs with a keyId: the public key, the principal (a user
// OCID, or the service account a session was issued to) and, for a
// session, when it stops counting.
type signer struct {
	key       *rsa.PublicKey
	principal string
	expires   time.Time // zero: never
}

// errNotAuthenticated carries why a signature was rejected; the reason is
// logged in the call log but, as with OCI, not returned to the caller.
type errNotAuthenticated struct{ reason string }

func (e errNotAuthenticated) Error() string { return e.reason }

// authenticate verifies an OCI HTTP signature (draft-cavage-http-signatures,
// rsa-sha256) over the headers it names, requires the date, request target
// and host to be among them and, for requests with a body, the body headers
// with a matching x-content-sha256. It returns who signed.
func (e *Emulator) authenticate(r *http.Request, body []byte, now time.Time) (string, error) {
	s, err := verify(r, body, now, e.opts.MaxClockSkew, e.signer, "host")
	if err != nil {
		return "", err
	}
	return s.principal, nil
}

// signer is who signs with keyID, an API key or a session token the
// emulator issued and that has not ended at now.
func (e *Emulator) signer(keyID string, now time.Time) (*signer, error) {
	e.mu.Lock()
	s := e.keys[keyID]
	e.mu.Unlock()
	switch {
	case s == nil && strings.HasPrefix(keyID, sessionKeyPrefix):
		return nil, errNotAuthenticated{"session token not issued by this emulator"}
	case s == nil:
		return nil, errNotAuthenticated{"unknown keyId " + keyID}
	case !s.expires.IsZero() && !now.Before(s.expires):
		return nil, errNotAuthenticated{"session token of " + s.principal + " expired"}
	}
	return s, nil
}

// verify checks r's signature by the signer lookup finds for its keyId,
// over the date, the request target, the body headers of a request with a
// body, and also the headers named in also.
func verify(r *http.Request, body []byte, now time.Time, maxSkew time.Duration, lookup func(keyID string, now time.Time) (*signer, error), also ...string) (*signer, error) {
	params, err := parseSignatureHeader(r.Header.Get("Authorization"))
	if err != nil {
		return nil, errNotAuthenticated{err.Error()}
	}
	if params["version"] != "1" || params["algorithm"] != "rsa-sha256" {
		return nil, errNotAuthenticated{"unsupported signature version or algorithm"}
	}
	s, err := lookup(params["keyId"], now)
	if err != nil {
		return nil, err
	}

	headers := strings.Fields(strings.ToLower(params["headers"]))
	signed := map[string]bool{}
	for _, h := range headers {
		signed[h] = true
	}
	dateHeader := "date"
	if signed["x-date"] {
		dateHeader = "x-date"
	}
	for _, h := range append([]string{dateHeader, "(request-target)"}, also...) {
		if !signed[h] {
			return nil, errNotAuthenticated{"header " + h + " is not signed"}
		}
	}
	if r.Method == http.MethodPost || r.Method == http.MethodPut || r.Method == http.MethodPatch {
		for _, h := range []string{"content-length", "content-type", "x-content-sha256"} {
			if !signed[h] {
				return nil, errNotAuthenticated{"header " + h + " is not signed"}
			}
		}
		sum := sha256.Sum256(body)
		if r.Header.Get("x-content-sha256") != base64.StdEncoding.EncodeToString(sum[:]) {
			return nil, errNotAuthenticated{"x-content-sha256 does not match the body"}
		}
	}
	date, err := http.ParseTime(r.Header.Get(dateHeader))
	if err != nil {
		return nil, errNotAuthenticated{"unparsable " + dateHeader}
	}
	if skew := now.Sub(date); skew > maxSkew || -skew > maxSkew {
		return nil, errNotAuthenticated{fmt.Sprintf("%s is %s off", dateHeader, skew.Round(time.Second))}
	}

	var signingString bytes.Buffer
	for i, h := range headers {
		if i > 0 {
			signingString.WriteByte('\n')
		}
		var value string
		switch h {
		case "(request-target)":
			value = strings.ToLower(r.Method) + " " + r.RequestURI
		case "host":
			value = r.Host
		default:
			value = r.Header.Get(h)
		}
		fmt.Fprintf(&signingString, "%s: %s", h, value)
	}
	signature, err := base64.StdEncoding.DecodeString(params["signature"])
	if err != nil {
		return nil, errNotAuthenticated{"signature is not base64"}
	}
	digest := sha256.Sum256(signingString.Bytes())
	if err := rsa.VerifyPKCS1v15(s.key, crypto.SHA256, digest[:], signature); err != nil {
		return nil, errNotAuthenticated{"signature does not verify"}
	}
	return s, nil
}

// parseSignatureHeader splits `Signature k="v",k="v"` into its parameters.
func parseSignatureHeader(value string) (map[string]string, error) {
	rest, ok := strings.CutPrefix(value, "Signature ")
	if !ok {
		return nil, errors.New("missing or non-signature Authorization header")
	}
	params := map[string]string{}
	for rest != "" {
		name, after, ok := strings.Cut(rest, `="`)
		if !ok {
			return nil, errors.New("malformed Authorization header")
		}
		val, after, ok := strings.Cut(after, `"`)
		if !ok {
			return nil, errors.New("malformed Authorization header")
		}
		params[strings.TrimSpace(name)] = val
		rest = strings.TrimPrefix(after, ",")
	}
	for _, p := range []string{"version", "headers", "keyId", "algorithm", "signature"} {
		if params[p] == "" {
			return nil, errors.New("Authorization header lacks " + p)
		}
	}
	return params, nil
}
