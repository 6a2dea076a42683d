package ociemu

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"
)

// OKE workload identity, as oci-go-sdk's OkeWorkloadIdentityConfigurationProvider*
// use it (common/auth/federation_client_oke_workload_identity.go): a pod
// POSTs {"podKey": "<PEM public key>"} to
// https://<Kubernetes service host>:12250/resourcePrincipalSessionTokens
// with its service account token as a Bearer token. The answer is a JSON
// string containing the base64 of {"token": "ST$<jwt>"}; the SDK reads the
// jwt's iat and exp (renewing at half its life) and signs requests with
// keyId "ST$<jwt>" and the private half of podKey.

// ProxymuxPort is the port OKE serves the exchange on; the SDK fixes it
// (auth.KubernetesProxymuxServicePort).
const ProxymuxPort = "12250"

// sessionKeyPrefix starts the keyId of a request signed with a session token.
const sessionKeyPrefix = "ST$"

// SessionTenancy is the tenancy the emulator's session tokens name
// (claim res_tenant).
const SessionTenancy = "ocid1.tenancy.oc1..ociemusessions"

// ServiceAccountReviewer says whose Kubernetes service account token is
// (e.g. system:serviceaccount:team-a:lb-writer), as OKE's proxy asks the
// cluster (a TokenReview); an error refuses the exchange.
type ServiceAccountReviewer func(ctx context.Context, token string) (serviceAccount string, err error)

// ServeWorkloadIdentity serves the token exchange on ProxymuxPort of a free
// loopback address, over TLS with a certificate CACertPEM signed, until
// Close. It returns the address, for the SDK as the Kubernetes service host.
// review checks each service account token presented.
func (e *Emulator) ServeWorkloadIdentity(review ServiceAccountReviewer) (host string, err error) {
	// The SDK fixes the port, so tests running side by side each take
	// another of loopback's 16 million addresses.
	var listener net.Listener
	for range 20 {
		n, err := rand.Int(rand.Reader, big.NewInt(254*254*254))
		if err != nil {
			return "", err
		}
		v := int(n.Int64())
		ip := net.IPv4(127, byte(1+v/(254*254)), byte(1+v/254%254), byte(1+v%254))
		listener, err = net.Listen("tcp", net.JoinHostPort(ip.String(), ProxymuxPort))
		if errors.Is(err, syscall.EADDRINUSE) {
			continue
		}
		if err != nil {
			return "", err
		}
		host = ip.String()
		break
	}
	if listener == nil {
		return "", errors.New("no free loopback address for the workload identity exchange")
	}
	cert, err := e.ca.issue(3, net.ParseIP(host))
	if err != nil {
		listener.Close()
		return "", err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /resourcePrincipalSessionTokens", func(w http.ResponseWriter, r *http.Request) {
		e.exchange(w, r, review)
	})
	e.serveIdentity(listener, mux, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	return host, nil
}

// serveIdentity serves an identity service's handler on listener, over TLS
// when tlsConfig is set, until the emulator closes.
func (e *Emulator) serveIdentity(listener net.Listener, handler http.Handler, tlsConfig *tls.Config) {
	server := &http.Server{
		Handler:           handler,
		ErrorLog:          log.New(io.Discard, "", 0),
		ReadHeaderTimeout: 10 * time.Second,
		TLSConfig:         tlsConfig,
	}
	e.mu.Lock()
	e.identityServers = append(e.identityServers, server)
	e.mu.Unlock()
	if tlsConfig != nil {
		go func() { _ = server.ServeTLS(listener, "", "") }() // ends with the listener
	} else {
		go func() { _ = server.Serve(listener) }()
	}
}

// exchange issues a session token for the public key in the body to the
// service account whose token is the Bearer credential.
func (e *Emulator) exchange(w http.ResponseWriter, r *http.Request, review ServiceAccountReviewer) {
	bearer, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || bearer == "" {
		http.Error(w, "a service account token is required", http.StatusUnauthorized)
		return
	}
	var body struct {
		PodKey string `json:"podKey"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 64<<10)).Decode(&body); err != nil {
		http.Error(w, "the body is not {\"podKey\": ...}", http.StatusBadRequest)
		return
	}
	key, err := parseRSAPublicKey([]byte(body.PodKey))
	if err != nil {
		http.Error(w, "podKey: "+err.Error(), http.StatusBadRequest)
		return
	}
	serviceAccount, err := review(r.Context(), bearer)
	if err != nil {
		http.Error(w, "the service account token is not valid", http.StatusUnauthorized)
		return
	}
	token, err := e.issueSession(serviceAccount, key, time.Now())
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	payload, _ := json.Marshal(map[string]string{"token": sessionKeyPrefix + token})
	answer, _ := json.Marshal(base64.StdEncoding.EncodeToString(payload))
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(answer) // a client gone is its own business
}

// issueSession makes a session token for principal, signing with the
// private half of key, valid for SessionTokenLifetime from now; expired
// sessions are dropped.
func (e *Emulator) issueSession(principal string, key *rsa.PublicKey, now time.Time) (string, error) {
	header, _ := json.Marshal(map[string]string{"alg": "HS256", "typ": "JWT"})
	nonce := make([]byte, 16)
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	expires := now.Add(e.opts.SessionTokenLifetime)
	claims, _ := json.Marshal(map[string]any{
		"iat": now.Unix(), "exp": expires.Unix(), "sub": principal,
		"res_tenant": SessionTenancy, "jti": fmt.Sprintf("%x", nonce),
	})
	enc := base64.RawURLEncoding
	unsigned := enc.EncodeToString(header) + "." + enc.EncodeToString(claims)
	mac := hmac.New(sha256.New, e.sessionSecret)
	mac.Write([]byte(unsigned))
	token := unsigned + "." + enc.EncodeToString(mac.Sum(nil))

	e.mu.Lock()
	defer e.mu.Unlock()
	for id, s := range e.keys {
		if !s.expires.IsZero() && !now.Before(s.expires) {
			delete(e.keys, id)
		}
	}
	e.keys[sessionKeyPrefix+token] = &signer{key: key, principal: principal, expires: expires}
	e.counters.SessionTokens++
	return token, nil
}

// ExpireSessions ends the session tokens issued to principal now, as their
// expiry or a revocation would: requests they sign are refused while the
// SDK, trusting the token's own exp, still uses them.
func (e *Emulator) ExpireSessions(principal string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := time.Now()
	for _, s := range e.keys {
		if !s.expires.IsZero() && s.principal == principal {
			s.expires = now
		}
	}
}

// RevokePolicies makes principal one no IAM policy names, as when the
// policy a guide asks for was never written: OCI answers each of its calls
// 404 NotAuthorizedOrNotFound, as it answers for a resource that does not
// exist (OCI API errors: "Authorization failed or requested resource not
// found"; OCI IAM: a request the policies do not allow reads as if the
// resource were not there). Authentication itself still succeeds.
func (e *Emulator) RevokePolicies(principal string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.unpermitted[principal] = true
}

// GrantPolicies undoes RevokePolicies.
func (e *Emulator) GrantPolicies(principal string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.unpermitted, principal)
}

func (e *Emulator) permitted(principal string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return !e.unpermitted[principal]
}
