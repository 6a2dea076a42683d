package oci

import (
	"crypto/rand"
	"crypto/rsa"
	"fmt"
	"testing"
)

// renewing is a session whose key and token change together, renewed by
// the read of its key when renew says so, as the SDK's are when due.
type renewing struct {
	keys  []*rsa.PrivateKey
	n     int
	renew func() bool
}

func (r *renewing) KeyID() (string, error) { return fmt.Sprintf("ST$token-%d", r.n), nil }
func (r *renewing) PrivateRSAKey() (*rsa.PrivateKey, error) {
	if r.renew() {
		r.n++
	}
	return r.keys[r.n], nil
}

// A renewal between reading the token and the key is read again: the
// pair signed with is a key and its own token.
func TestPinReadsAKeyWithItsToken(t *testing.T) {
	keys := make([]*rsa.PrivateKey, 4)
	for i := range keys {
		k, err := rsa.GenerateKey(rand.Reader, 1024)
		if err != nil {
			t.Fatal(err)
		}
		keys[i] = k
	}
	for renewals, wantErr := range map[int]bool{0: false, 1: false, 2: false, 3: true} {
		session := &renewing{keys: keys}
		session.renew = func() bool { return session.n < renewals }
		s := &pairedSigner{provider: session}
		err := s.pin()
		if (err != nil) != wantErr {
			t.Errorf("%d renewals: %v", renewals, err)
			continue
		}
		if want := fmt.Sprintf("ST$token-%d", session.n); err == nil && (s.pinned.id != want || s.pinned.key != keys[session.n]) {
			t.Errorf("%d renewals: pinned %s with key %d's pair, want %s", renewals, s.pinned.id, session.n, want)
		}
	}
}
