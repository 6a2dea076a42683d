package ownership

import (
	"context"
	"crypto/rand"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// KeyField is the key's field in its Secret.
const KeyField = "key"

// keyBytes is the key's length: SHA-256's block is longer, its output is
// this, and an HMAC key of the hash's output length is what RFC 2104 asks.
const keyBytes = 32

// KeyStore keeps the signing key in a Secret: read once, and made by the
// first writer that needs it (the key exists only once a record was
// signed, so before that no record can verify). A key once read is kept
// for the life of the process.
type KeyStore struct {
	// Reader reads past any cache: the manager caches only Secrets'
	// metadata, and this Secret is read once.
	Reader client.Reader
	// Writer makes the Secret; nil for a store that only reads.
	Writer client.Writer
	Secret types.NamespacedName

	mu  sync.Mutex
	key []byte
}

// Key returns the key, or nil when there is none yet.
func (s *KeyStore) Key(ctx context.Context) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.key != nil {
		return s.key, nil
	}
	return s.read(ctx)
}

// KeyToSign returns the key, making it first when there is none.
func (s *KeyStore) KeyToSign(ctx context.Context) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.key != nil {
		return s.key, nil
	}
	if key, err := s.read(ctx); key != nil || err != nil {
		return key, err
	}
	key := make([]byte, keyBytes)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: s.Secret.Namespace, Name: s.Secret.Name,
			Labels: map[string]string{"app.kubernetes.io/name": "lbregistrar"},
		},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{KeyField: key},
	}
	if s.Writer == nil {
		return nil, fmt.Errorf("no ownership record key Secret %s, and this store makes none", s.Secret)
	}
	err := s.Writer.Create(ctx, secret)
	if apierrors.IsAlreadyExists(err) { // another replica made it first
		return s.read(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("creating the ownership record key Secret %s: %w", s.Secret, err)
	}
	s.key = key
	return key, nil
}

// read loads the key; nil when the Secret does not exist.
func (s *KeyStore) read(ctx context.Context) ([]byte, error) {
	var secret corev1.Secret
	err := s.Reader.Get(ctx, s.Secret, &secret)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the ownership record key Secret %s: %w", s.Secret, err)
	}
	key := secret.Data[KeyField]
	if len(key) < keyBytes {
		return nil, fmt.Errorf("the ownership record key Secret %s has no key of %d bytes in %q", s.Secret, keyBytes, KeyField)
	}
	s.key = key
	return key, nil
}
