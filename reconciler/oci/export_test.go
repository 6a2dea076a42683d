package oci

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"testing"
)

// NewKey is a new RSA-2048 key, and its PEM.
func NewKey(t testing.TB) (*rsa.PrivateKey, []byte) {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return k, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)})
}

// AgeNLBReads makes every NLB's read older than nlbTTL, so the next
// backend set read or work request listing reads the NLB again.
func AgeNLBReads(c *Client) {
	c.nlbs.mu.Lock()
	defer c.nlbs.mu.Unlock()
	for lb, r := range c.nlbs.read {
		r.at = r.at.Add(-2 * nlbTTL)
		c.nlbs.read[lb] = r
	}
}
