package certs

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"net/http"
	"sync"
)

// Source provides the webhook server's certificate. Run it as a manager
// runnable; plug GetCertificate into the server's tls.Config and ReadyCheck
// into the manager's readiness checks.
type Source interface {
	Start(ctx context.Context) error
	GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error)
	ReadyCheck(*http.Request) error
}

var errNotLoaded = errors.New("no serving certificate loaded yet")

// servingCert is the certificate handed to every new TLS handshake.
type servingCert struct {
	mu      sync.RWMutex
	current *tls.Certificate
	pem     KeyPair
}

// load replaces the served certificate when the pair changed; connections
// already open keep theirs, new ones get the new one.
func (s *servingCert) load(pair KeyPair) error {
	s.mu.RLock()
	same := s.current != nil && bytes.Equal(s.pem.CertPEM, pair.CertPEM) && bytes.Equal(s.pem.KeyPEM, pair.KeyPEM)
	s.mu.RUnlock()
	if same {
		return nil
	}
	cert, err := tls.X509KeyPair(pair.CertPEM, pair.KeyPEM)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.current, s.pem = &cert, pair
	s.mu.Unlock()
	return nil
}

// GetCertificate returns the certificate loaded last.
func (s *servingCert) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.current == nil {
		return nil, errNotLoaded
	}
	return s.current, nil
}

// ReadyCheck fails until a certificate is loaded.
func (s *servingCert) ReadyCheck(*http.Request) error {
	_, err := s.GetCertificate(nil)
	return err
}
