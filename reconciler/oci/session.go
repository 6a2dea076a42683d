package oci

import (
	"crypto/rsa"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/oracle/oci-go-sdk/v65/common"
)

// pendingSignIn is one session's sign-in in the background; cl and err are
// set when done is closed.
type pendingSignIn struct {
	done chan struct{}
	cl   *Client
	err  error
}

// ErrSigningIn says a session's sign-in is still under way: try again soon.
var ErrSigningIn = errors.New("the sign-in to OCI is still under way")

// SessionClient returns the cached client that signs in as identity (a
// name no other identity has) in region, with the provider newProvider
// builds on first use: a session the SDK renews itself, such as OKE
// workload identity's. A provider that cannot sign in fails the build, and
// nothing is cached.
//
// A sign-in can take long (off OCI, the SDK asks the instance metadata
// service for about two minutes), so it runs in the background, one at a
// time per identity and region: a caller waits for it at most
// Options.SignInWait and then gets ErrSigningIn, so no reconcile is kept
// waiting by it. Its failure is kept for the next caller, and the one after
// that signs in afresh.
func (f *Factory) SessionClient(identity, region string, newProvider func() (common.ConfigurationProvider, error)) (*Client, error) {
	d := digest([]byte("session"), []byte(identity), []byte(region))
	f.mu.Lock()
	cl, in := f.clients[d], f.signIns[d]
	if cl != nil {
		f.mu.Unlock()
		return cl, nil
	}
	if in == nil {
		in = &pendingSignIn{done: make(chan struct{})}
		f.signIns[d] = in
		go f.signIn(d, in, region, newProvider)
	}
	f.mu.Unlock()
	wait := time.NewTimer(f.opts.SignInWait)
	defer wait.Stop()
	select {
	case <-in.done:
	case <-wait.C:
		return nil, ErrSigningIn
	}
	if in.err != nil {
		f.mu.Lock()
		if f.signIns[d] == in {
			delete(f.signIns, d)
		}
		f.mu.Unlock()
	}
	return in.cl, in.err
}

// signIn builds the session client cached under d and ends in.
func (f *Factory) signIn(d string, in *pendingSignIn, region string, newProvider func() (common.ConfigurationProvider, error)) {
	cl, err := f.sessionClient(d, region, newProvider)
	f.mu.Lock()
	defer f.mu.Unlock()
	if err == nil {
		cl = f.store(d, cl)
		delete(f.signIns, d)
	}
	in.cl, in.err = cl, err
	close(in.done)
}

func (f *Factory) sessionClient(d, region string, newProvider func() (common.ConfigurationProvider, error)) (*Client, error) {
	provider, err := newProvider()
	if err != nil {
		return nil, err
	}
	cl, err := f.clientOf(provider, region)
	if err != nil {
		return nil, err
	}
	signer := &pairedSigner{provider: provider}
	signer.inner = common.DefaultRequestSigner(&signer.pinned)
	cl.lb.Signer, cl.nlb.Signer = signer, signer
	// The SDK renews a session only as its own clock says; one OCI
	// stopped accepting earlier (revoked, or its identity gone) would
	// fail every call until then. So a 401 drops the client, and the
	// next call signs in afresh.
	forget := func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.clients[d] == cl {
			delete(f.clients, d)
		}
	}
	cl.lb.HTTPClient = forgetOnUnauthorized{cl.lb.HTTPClient, forget}
	cl.nlb.HTTPClient = forgetOnUnauthorized{cl.nlb.HTTPClient, forget}
	return cl, nil
}

// forgetOnUnauthorized sends requests through next and calls forget when
// OCI answers 401.
type forgetOnUnauthorized struct {
	next   common.HTTPRequestDispatcher
	forget func()
}

func (d forgetOnUnauthorized) Do(req *http.Request) (*http.Response, error) {
	resp, err := d.next.Do(req)
	if err == nil && resp.StatusCode == http.StatusUnauthorized {
		d.forget()
	}
	return resp, err
}

// pairedSigner signs each request with a session's key and the token
// issued for it. The SDK's signer reads the key and then the token, each
// under its own lock, and a session renewed in between (due by then, or
// renewed by another request) pairs the old key's signature with the new
// token, which OCI answers 401. So requests are signed one at a time, over
// a pair read until it stops changing.
type pairedSigner struct {
	provider common.KeyProvider
	inner    common.HTTPRequestSigner // signs with pinned

	mu     sync.Mutex
	pinned pinnedKey
}

func (s *pairedSigner) Sign(r *http.Request) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.pin(); err != nil {
		return err
	}
	return s.inner.Sign(r)
}

// pin reads a key and its token: the token read before and after the key
// is the same, so no renewal came between.
func (s *pairedSigner) pin() error {
	for range 3 {
		id, err := s.provider.KeyID()
		if err != nil {
			return err
		}
		key, err := s.provider.PrivateRSAKey()
		if err != nil {
			return err
		}
		if again, err := s.provider.KeyID(); err != nil {
			return err
		} else if again == id {
			s.pinned = pinnedKey{id: id, key: key}
			return nil
		}
	}
	return errors.New("the OCI session was renewed three times while a request was signed")
}

// pinnedKey is a key and its token, as pin read them.
type pinnedKey struct {
	id  string
	key *rsa.PrivateKey
}

func (k *pinnedKey) KeyID() (string, error)                  { return k.id, nil }
func (k *pinnedKey) PrivateRSAKey() (*rsa.PrivateKey, error) { return k.key, nil }
