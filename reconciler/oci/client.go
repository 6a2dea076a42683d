// Package oci is the reconciler's thin adapter over the OCI SDK: it reads
// and writes backend sets of classic load balancers and network load
// balancers, waits for their work requests, reads the private IPs of the
// instances pods run on, and classifies errors for retry.
//
// Every client is built with the SDK's own retries and circuit breaker
// switched off, deliberately: a write is retried as a whole read-modify-write
// by the caller (a 412 needs a fresh read and ETag, a 409 needs the load
// balancer's current work request to finish), and a per-client breaker would
// let one load balancer's 409 storm block every other load balancer that
// shares the credential. Calls are paced instead by one client-side rate
// limit shared by every client of the process.
package oci

import (
	"context"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/oracle/oci-go-sdk/v65/common"
	"github.com/oracle/oci-go-sdk/v65/core"
	"github.com/oracle/oci-go-sdk/v65/loadbalancer"
	"github.com/oracle/oci-go-sdk/v65/networkloadbalancer"
	"golang.org/x/time/rate"
)

// Credentials is one OCI API signing key. It is never logged or printed.
type Credentials struct {
	Tenancy, User, Fingerprint, Region string
	PrivateKey                         []byte
	Passphrase                         []byte // nil when the key is not encrypted
}

// String keeps key material out of any accidental formatting.
func (c Credentials) String() string {
	return fmt.Sprintf("oci.Credentials{user=%s, fingerprint=%s, region=%s}", c.User, c.Fingerprint, c.Region)
}

// GoString is String, for %#v.
func (c Credentials) GoString() string { return c.String() }

// digest identifies credentials in the client cache.
func (c Credentials) digest() string {
	return digest([]byte(c.Tenancy), []byte(c.User), []byte(c.Fingerprint), []byte(c.Region), c.PrivateKey, c.Passphrase)
}

// digest is the SHA-256 of parts, each prefixed by its length so that no
// two different lists of parts share one, in 64 hex characters.
func digest(parts ...[]byte) string {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%d:", len(p))
		h.Write(p)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Options configure every client a Factory builds.
type Options struct {
	// LoadBalancerEndpoint and NetworkLoadBalancerEndpoint replace the
	// regional endpoints (private or dedicated-region endpoints, or a test
	// emulator), e.g. "https://lb.example.internal". Empty means the SDK's.
	LoadBalancerEndpoint        string
	NetworkLoadBalancerEndpoint string
	// CoreEndpoint replaces the Core Services (compute and networking)
	// endpoint the private IP lookups of pod targets use (PrivateIPs).
	CoreEndpoint string
	// HTTPClient sends every request; nil means a client with a 60 s timeout.
	HTTPClient *http.Client
	// RateLimit and Burst pace OCI calls across the whole process.
	RateLimit rate.Limit
	Burst     int
	// PollMin and PollMax bound work-request polling.
	PollMin, PollMax time.Duration
	// SignInWait is how long SessionClient waits for a sign-in under way
	// before it answers ErrSigningIn; zero means 5 s.
	SignInWait time.Duration
}

// Factory builds clients and caches one per distinct credential; a changed
// Secret has a new digest and so gets a new client.
type Factory struct {
	opts       Options
	dispatcher *dispatcher
	polls      map[kind]*estimator

	mu      sync.Mutex
	clients map[string]*Client
	signIns map[string]*pendingSignIn // session sign-ins under way, or failed and not yet reported
}

// maxCachedClients bounds the cache; rotated-away credentials fall out when it is reset.
const maxCachedClients = 64

// DefaultOptions are the pace of OCI calls and work-request polls that serve
// starts from (its --oci-rate-limit, --oci-burst and --work-request-poll-*
// flags), and what NewFactory gives Options fields left zero.
func DefaultOptions() Options {
	return Options{RateLimit: 10, Burst: 20, PollMin: 500 * time.Millisecond, PollMax: 10 * time.Second}
}

// NewFactory returns a Factory; zero Options fields get DefaultOptions'.
func NewFactory(o Options) *Factory {
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Timeout: 60 * time.Second}
	}
	d := DefaultOptions()
	if o.RateLimit == 0 {
		o.RateLimit = d.RateLimit
	}
	if o.Burst == 0 {
		o.Burst = d.Burst
	}
	if o.PollMin == 0 {
		o.PollMin = d.PollMin
	}
	if o.PollMax == 0 {
		o.PollMax = d.PollMax
	}
	if o.SignInWait == 0 {
		o.SignInWait = 5 * time.Second
	}
	return &Factory{
		opts:       o,
		dispatcher: &dispatcher{client: o.HTTPClient, limiter: rate.NewLimiter(o.RateLimit, o.Burst)},
		polls: map[kind]*estimator{
			kindLB:  {min: o.PollMin, max: o.PollMax},
			kindNLB: {min: o.PollMin, max: o.PollMax},
		},
		clients: map[string]*Client{},
		signIns: map[string]*pendingSignIn{},
	}
}

// ErrInvalidCredentials wraps every credential problem; its message never
// contains key material.
var ErrInvalidCredentials = errors.New("invalid OCI API key")

// RateLimit is the OCI calls per second the factory's clients share.
func (f *Factory) RateLimit() rate.Limit { return f.opts.RateLimit }

// Client returns the cached client for c, building it on first use.
func (f *Factory) Client(c Credentials) (*Client, error) {
	return f.cached(c.digest(), func() (*Client, error) { return f.build(c) })
}

// cached returns the client cached under d, building it on first use,
// outside the lock; when two race, the first stored wins.
func (f *Factory) cached(d string, build func() (*Client, error)) (*Client, error) {
	f.mu.Lock()
	cl := f.clients[d]
	f.mu.Unlock()
	if cl != nil {
		return cl, nil
	}
	cl, err := build()
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.store(d, cl), nil
}

// store caches cl under d, unless another build stored one first, and
// returns the one cached. f.mu is locked.
func (f *Factory) store(d string, cl *Client) *Client {
	if stored := f.clients[d]; stored != nil {
		return stored
	}
	if len(f.clients) >= maxCachedClients {
		clear(f.clients)
	}
	f.clients[d] = cl
	return cl
}

func (f *Factory) build(c Credentials) (*Client, error) {
	for name, v := range map[string]string{"tenancy": c.Tenancy, "user": c.User, "fingerprint": c.Fingerprint, "region": c.Region} {
		if strings.TrimSpace(v) == "" {
			return nil, fmt.Errorf("%w: apiKey.%s is empty", ErrInvalidCredentials, name)
		}
	}
	var pass *string
	if c.Passphrase != nil {
		p := string(c.Passphrase)
		pass = &p
	}
	// Parse once here so a bad key or passphrase is reported now, in words,
	// rather than as a signing failure on every call. The SDK's parse error
	// text carries no key material, but it is replaced anyway.
	key, err := common.PrivateKeyFromBytes(c.PrivateKey, pass)
	if err != nil {
		if pass == nil && strings.Contains(err.Error(), "encrypted") {
			return nil, fmt.Errorf("%w: the private key is encrypted and no passphrase is given", ErrInvalidCredentials)
		}
		return nil, fmt.Errorf("%w: the private key is not a PEM RSA key or the passphrase is wrong", ErrInvalidCredentials)
	}
	provider := parsedKey{common.NewRawConfigurationProvider(c.Tenancy, c.User, c.Region, c.Fingerprint, string(c.PrivateKey), pass), key}
	cl, err := f.clientOf(provider, c.Region)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidCredentials, err)
	}
	return cl, nil
}

// parsedKey is a configuration provider that hands the signer the key
// parsed once: the SDK's own parses the PEM, and precomputes the RSA
// values, for every request it signs (a CPU profile of BenchmarkScale
// found it a tenth of the signing).
type parsedKey struct {
	common.ConfigurationProvider
	key *rsa.PrivateKey
}

func (p parsedKey) PrivateRSAKey() (*rsa.PrivateKey, error) { return p.key, nil }

// clientOf builds the clients of both services signing with provider, for
// region (which a session provider's own region need not be).
func (f *Factory) clientOf(provider common.ConfigurationProvider, region string) (*Client, error) {
	lb, err := loadbalancer.NewLoadBalancerClientWithConfigurationProvider(provider)
	if err != nil {
		return nil, err
	}
	nlb, err := networkloadbalancer.NewNetworkLoadBalancerClientWithConfigurationProvider(provider)
	if err != nil {
		return nil, err
	}
	compute, err := core.NewComputeClientWithConfigurationProvider(provider)
	if err != nil {
		return nil, err
	}
	network, err := core.NewVirtualNetworkClientWithConfigurationProvider(provider)
	if err != nil {
		return nil, err
	}
	lb.SetRegion(region)
	nlb.SetRegion(region)
	compute.SetRegion(region)
	network.SetRegion(region)
	f.configure(&lb.BaseClient, f.opts.LoadBalancerEndpoint)
	f.configure(&nlb.BaseClient, f.opts.NetworkLoadBalancerEndpoint)
	f.configure(&compute.BaseClient, f.opts.CoreEndpoint)
	f.configure(&network.BaseClient, f.opts.CoreEndpoint)
	return &Client{lb: lb, nlb: nlb, compute: compute, network: network, polls: f.polls, nlbs: &nlbCache{read: map[string]nlbRead{}}, classics: &classicCache{read: map[string]classicRead{}},
		listings: &compartmentListings{by: map[string]compartmentListing{}}, privateIPs: &privateIPCache{}}, nil
}

func (f *Factory) configure(c *common.BaseClient, endpoint string) {
	noRetry := common.NoRetryPolicy()
	c.Configuration.RetryPolicy = &noRetry
	c.Configuration.CircuitBreaker = nil
	c.HTTPClient = f.dispatcher
	if endpoint != "" {
		c.Host = endpoint
	}
}

// Client calls the LB and NLB APIs, and the Core Services' instance and
// private IP reads, with one credential. It is safe for concurrent use.
type Client struct {
	lb         loadbalancer.LoadBalancerClient
	nlb        networkloadbalancer.NetworkLoadBalancerClient
	compute    core.ComputeClient
	network    core.VirtualNetworkClient
	polls      map[kind]*estimator
	nlbs       *nlbCache
	classics   *classicCache
	listings   *compartmentListings
	privateIPs *privateIPCache
}

type kind string

const (
	kindLB  kind = "loadbalancer"
	kindNLB kind = "networkloadbalancer"
)

func kindOf(loadBalancerID string) kind {
	if IsNetworkLoadBalancer(loadBalancerID) {
		return kindNLB
	}
	return kindLB
}

// IsNetworkLoadBalancer reports whether an OCID names a network load balancer.
func IsNetworkLoadBalancer(id string) bool {
	return strings.Contains(id, ".networkloadbalancer.")
}

// dispatcher sends every SDK request: it waits for the shared rate limit,
// sends the request under the caller's own context, and remembers a
// Retry-After header for the caller's error classification.
type dispatcher struct {
	client  *http.Client
	limiter *rate.Limiter
}

func (d *dispatcher) Do(req *http.Request) (*http.Response, error) {
	call, _ := req.Context().Value(callKey{}).(*callState)
	if call != nil {
		req = req.WithContext(call.ctx)
	}
	if err := d.yield(req.Context()); err != nil {
		return nil, err
	}
	if err := d.limiter.Wait(req.Context()); err != nil {
		return nil, err
	}
	if call != nil {
		call.setRequestID(req.Header.Get("opc-request-id")) // the SDK's own, all there is when no answer comes
	}
	resp, err := d.client.Do(req)
	if err != nil {
		return nil, err
	}
	if call != nil {
		if h := resp.Header.Get("Retry-After"); h != "" {
			call.setRetryAfter(h)
		}
		if id := resp.Header.Get("opc-request-id"); id != "" {
			call.setRequestID(id)
		}
	}
	if resp.ContentLength > maxResponseBytes {
		_ = resp.Body.Close()
		return nil, &ResponseTooLargeError{Limit: maxResponseBytes}
	}
	resp.Body = &limitedBody{ReadCloser: resp.Body, left: maxResponseBytes}
	return resp, nil
}

// maxResponseBytes bounds what the SDK, which reads every answer whole, may
// read of one: a broken or hostile endpoint could otherwise make the
// controller allocate without limit. The largest answer read is a backend
// set of the most backends OCI allows (1,024 per load balancer), about
// 250 kB; the bound is far above it.
const maxResponseBytes = 8 << 20

// ResponseTooLargeError is an OCI answer longer than maxResponseBytes.
// Retrying at once cannot help, so it is not retryable; the next reconcile
// tries again.
type ResponseTooLargeError struct{ Limit int64 }

func (e *ResponseTooLargeError) Error() string {
	return fmt.Sprintf("OCI answered with a body longer than %d bytes; not read", e.Limit)
}

// limitedBody fails a read past left bytes.
type limitedBody struct {
	io.ReadCloser
	left int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		var one [1]byte
		if n, _ := b.ReadCloser.Read(one[:]); n > 0 {
			return 0, &ResponseTooLargeError{Limit: maxResponseBytes}
		}
		return 0, io.EOF
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}

type callKey struct{}

type yieldKey struct{}

// Yielding marks the OCI calls made with ctx as ones no decision waits on
// (health reads, the watch's periodic listings): when calls queue for the
// shared rate limit, they let the writes, their reads and their polls go
// first.
func Yielding(ctx context.Context) context.Context {
	return context.WithValue(ctx, yieldKey{}, true)
}

// yield keeps a yielding call waiting until the rate limit's bucket has
// half its burst, so that it takes no token a call of the write path is waiting
// for; but no longer than the bucket takes to fill, so that it never
// starves behind a write path that keeps the bucket low.
func (d *dispatcher) yield(ctx context.Context) error {
	if ctx.Value(yieldKey{}) == nil || d.limiter.Limit() == rate.Inf {
		return nil
	}
	perToken := float64(time.Second) / float64(d.limiter.Limit())
	deadline := time.Now().Add(time.Duration(float64(d.limiter.Burst()) * perToken))
	for {
		lack := float64(d.limiter.Burst())/2 - d.limiter.Tokens()
		wait := min(time.Duration(lack*perToken), time.Until(deadline))
		if lack <= 0 || wait <= 0 {
			return nil
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// callState travels with one SDK call to the dispatcher.
type callState struct {
	ctx context.Context // the caller's, cancellation included

	mu         sync.Mutex
	retryAfter time.Duration // the SDK's error types do not keep headers
	requestID  string        // OCI's opc-request-id, or the one sent when no answer came
}

func (c *callState) setRequestID(id string) {
	c.mu.Lock()
	c.requestID = id
	c.mu.Unlock()
}

func (c *callState) getRequestID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.requestID
}

// setRetryAfter keeps a Retry-After of seconds (RFC 9110, section 10.2.3;
// OCI sends whole seconds), capped at maxRetryAfter; an HTTP date, or
// anything else, is ignored and the caller's own backoff applies.
func (c *callState) setRetryAfter(v string) {
	secs, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || !(secs >= 0) { // NaN too
		return
	}
	c.mu.Lock()
	c.retryAfter = time.Duration(min(secs, maxRetryAfter.Seconds()) * float64(time.Second))
	c.mu.Unlock()
}

// maxRetryAfter bounds a server's Retry-After before it becomes a
// Duration, which a large value would overflow; the writer bounds it
// further by its own backoff maximum.
const maxRetryAfter = time.Hour

func (c *callState) getRetryAfter() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.retryAfter
}

// call returns the context to hand the SDK for one call. The SDK gets a
// context that is never cancelled, because its retry wrapper reads the
// response it is still writing when the context ends first (a data race);
// the dispatcher puts the caller's context back on the HTTP request, so
// cancellation still aborts the request, and the SDK returns normally.
func call(ctx context.Context) (context.Context, *callState) {
	c := &callState{ctx: ctx}
	return context.WithValue(context.WithoutCancel(ctx), callKey{}, c), c
}
