package certs

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"time"
)

// backdate is how far before its issue time a certificate becomes valid, so
// that a peer whose clock is a little behind still accepts it. It is fixed so
// that the issue time can be read back from NotBefore.
const backdate = time.Minute

// CA is a certificate authority: its certificate and private key.
type CA struct {
	Cert    *x509.Certificate
	CertPEM []byte
	key     crypto.Signer
	keyPEM  []byte
}

// KeyPair is a PEM certificate and its PEM private key.
type KeyPair struct {
	CertPEM []byte
	KeyPEM  []byte
}

// NewCA creates a self-signed CA valid from now for validity.
func NewCA(commonName string, now time.Time, validity time.Duration) (*CA, error) {
	key, keyPEM, err := newKey()
	if err != nil {
		return nil, err
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("creating CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, CertPEM: encodePEM("CERTIFICATE", der), key: key, keyPEM: keyPEM}, nil
}

// IssueServing signs a serving certificate for hosts (DNS names or IP
// addresses), valid from now for validity but never beyond the CA itself.
func (ca *CA) IssueServing(hosts []string, now time.Time, validity time.Duration) (KeyPair, error) {
	if len(hosts) == 0 {
		return KeyPair{}, errors.New("a serving certificate needs at least one host")
	}
	key, keyPEM, err := newKey()
	if err != nil {
		return KeyPair{}, err
	}
	serial, err := newSerial()
	if err != nil {
		return KeyPair{}, err
	}
	notAfter := now.Add(validity)
	if notAfter.After(ca.Cert.NotAfter) {
		notAfter = ca.Cert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: hosts[0]},
		NotBefore:    now.Add(-backdate),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.key)
	if err != nil {
		return KeyPair{}, fmt.Errorf("signing serving certificate: %w", err)
	}
	return KeyPair{CertPEM: encodePEM("CERTIFICATE", der), KeyPEM: keyPEM}, nil
}

func newKey() (crypto.Signer, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generating key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return key, encodePEM("PRIVATE KEY", der), nil
}

func newSerial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
}

func encodePEM(blockType string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: blockType, Bytes: der})
}

// parseCA reads a CA from PEM; it fails unless the key matches the certificate.
func parseCA(certPEM, keyPEM []byte) (*CA, error) {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	signer, ok := pair.PrivateKey.(crypto.Signer)
	if !ok || !pair.Leaf.IsCA {
		return nil, errors.New("not a CA key pair")
	}
	return &CA{Cert: pair.Leaf, CertPEM: encodePEM("CERTIFICATE", pair.Certificate[0]), key: signer, keyPEM: keyPEM}, nil
}

// parseCertificates reads every CERTIFICATE block of a PEM bundle, skipping
// what does not parse.
func parseCertificates(bundle []byte) []*x509.Certificate {
	var certs []*x509.Certificate
	for {
		var block *pem.Block
		block, bundle = pem.Decode(bundle)
		if block == nil {
			return certs
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		if c, err := x509.ParseCertificate(block.Bytes); err == nil {
			certs = append(certs, c)
		}
	}
}

func encodeBundle(certs []*x509.Certificate) []byte {
	var out []byte
	for _, c := range certs {
		out = append(out, encodePEM("CERTIFICATE", c.Raw)...)
	}
	return out
}

// issuedAt is when a certificate made by this package was issued.
func issuedAt(c *x509.Certificate) time.Time { return c.NotBefore.Add(backdate) }

// renewalTime is when a certificate has used two thirds of its lifetime.
func renewalTime(c *x509.Certificate) time.Time {
	start := issuedAt(c)
	return start.Add(c.NotAfter.Sub(start) * 2 / 3)
}
