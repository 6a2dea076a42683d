// Package ociemu emulates the parts of the OCI Load Balancing (/20170115) and
// Network Load Balancer (/20200501) REST APIs that a backend registrar uses,
// closely enough that the unmodified oci-go-sdk v65 clients can be pointed at
// it: signed requests, asynchronous writes with work requests, conflicts
// while a load balancer is updating, etags, retry tokens and injectable
// faults. docs/oci-emulator.md lists what is modelled and what is assumed.
//
// In short: Start, SeedState (or LoadSeedFile; a test does all three with
// StartSeeded), NewUser for an SDK configuration provider, then set the SDK
// client's Host to URL (or HTTPSURL with HTTPClient). Backends, State,
// WorkRequests, Calls and Counters show what happened; AddFault changes
// what happens next.
package ociemu

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"runtime/pprof"
	"sync"
	"time"
)

// Options configure an Emulator. The zero value is usable.
type Options struct {
	// WorkRequestLatency is how long a write's work request takes from
	// ACCEPTED to SUCCEEDED; it is IN_PROGRESS for the second half of it.
	// Zero completes work requests before the write returns.
	WorkRequestLatency time.Duration

	// ClassicConflictCode is the service error code of the 409 a classic
	// load balancer returns to a write while another work request is in
	// flight. Defaults to "Conflict"; see the comment on conflictError.
	ClassicConflictCode string

	// BackendsPerBackendSet, when set, lowers the most backends a backend
	// set may have below OCI's documented limit (rules.go): a write that
	// would leave more is answered 400 LimitExceeded, and changes nothing.
	BackendsPerBackendSet int

	// MaxClockSkew is how far a request's date may be from the emulator's
	// clock. Defaults to 5 minutes, as OCI.
	MaxClockSkew time.Duration

	// SessionTokenLifetime is how long a session token the emulator issues
	// (workload identity) may sign requests. Defaults to an hour.
	SessionTokenLifetime time.Duration

	// HTTPAddress and HTTPSAddress are where to listen; both default to
	// 127.0.0.1:0 (a free loopback port).
	HTTPAddress  string
	HTTPSAddress string

	// Region appears in generated OCIDs and in the configuration providers
	// NewUser returns. Defaults to "us-ashburn-1".
	Region string

	// Dial connects health checks and forwarders to backends; defaults to
	// a net.Dialer's. It is only ever asked for loopback addresses: a
	// backend anywhere else is not connected to (see dialBackend).
	Dial func(ctx context.Context, network, address string) (net.Conn, error)

	// StandIns are loopback addresses connected to in place of backends'
	// own, by the backend's address: pods, whose EndpointSlice addresses
	// Kubernetes keeps off loopback, answer at a stand-in. A stand-in that
	// is not loopback is not connected to either.
	StandIns map[string]string
}

func (o Options) withDefaults() Options {
	if o.ClassicConflictCode == "" {
		o.ClassicConflictCode = "Conflict"
	}
	if o.SessionTokenLifetime == 0 {
		o.SessionTokenLifetime = time.Hour
	}
	if o.MaxClockSkew == 0 {
		o.MaxClockSkew = 5 * time.Minute
	}
	if o.HTTPAddress == "" {
		o.HTTPAddress = "127.0.0.1:0"
	}
	if o.HTTPSAddress == "" {
		o.HTTPSAddress = "127.0.0.1:0"
	}
	if o.Region == "" {
		o.Region = "us-ashburn-1"
	}
	if o.Dial == nil {
		o.Dial = (&net.Dialer{}).DialContext
	}
	return o
}

// Emulator serves both APIs over HTTP and HTTPS on loopback. All methods are
// safe for concurrent use.
type Emulator struct {
	opts Options

	httpListener  net.Listener
	httpsListener net.Listener
	server        *http.Server
	tlsServer     *http.Server
	ca            *certAuthority

	// logMu is locked (read) by each call from the moment it may change
	// state until it is logged, and taken by Calls.
	logMu sync.RWMutex
	mu    sync.Mutex
	keys  map[string]*signer // by keyId
	// sessionSecret signs the session tokens the emulator issues;
	// identityServers serve the identity services (ServeWorkloadIdentity,
	// ServeInstancePrincipal).
	sessionSecret   []byte
	identityServers []*http.Server
	instances       map[string]*instanceCert // by certificate fingerprint (InstancePrincipal)
	unpermitted     map[string]bool          // principals no policy names (RevokePolicies)
	balancers       map[string]*balancer     // by OCID
	computeMu       sync.RWMutex
	compute         compute
	workRequests    map[string]*workRequest // by OCID
	workOrder       []*workRequest          // creation order
	retryTokens     map[string]retryEntry
	faults          []*faultEntry
	nextFaultID     int
	calls           []Call
	counters        Counters
	forwarders      []*forwarder
	health          map[healthKey]*backendHealth
	probed          probeList // the backends health checks reach, per backend set
	stopHealth      context.CancelFunc
	probes          sync.WaitGroup // the health check loop and its checks
	closed          bool
	pendingTimers   map[*time.Timer]struct{}
}

// Start serves the emulator over plain HTTP and over HTTPS, by default on two
// free loopback ports; the HTTPS certificate comes from a freshly generated
// CA valid for 127.0.0.1, ::1 and localhost.
func Start(opts Options) (*Emulator, error) {
	e := newEmulator(opts)
	ca, err := newCertAuthority()
	if err != nil {
		return nil, err
	}
	e.ca = ca
	if e.httpListener, err = net.Listen("tcp", e.opts.HTTPAddress); err != nil {
		return nil, err
	}
	if e.httpsListener, err = net.Listen("tcp", e.opts.HTTPSAddress); err != nil {
		e.httpListener.Close()
		return nil, err
	}
	handler := e.Handler()
	// Connection-level errors (a client rejecting the certificate, say) are
	// expected in tests; what the API answered is in the call log.
	quiet := log.New(io.Discard, "", 0)
	e.server = &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, ErrorLog: quiet}
	e.tlsServer = &http.Server{
		Handler:           handler,
		ErrorLog:          quiet,
		ReadHeaderTimeout: 10 * time.Second,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{ca.serverCert}, MinVersion: tls.VersionTLS12},
	}
	// Every goroutine the emulator starts descends from these, so all of
	// them carry its profile label.
	go pprof.Do(context.Background(), profileLabels, func(context.Context) { _ = e.server.Serve(e.httpListener) })
	go pprof.Do(context.Background(), profileLabels, func(context.Context) { _ = e.tlsServer.ServeTLS(e.httpsListener, "", "") })
	var healthCtx context.Context
	healthCtx, e.stopHealth = context.WithCancel(context.Background())
	e.probes.Go(func() { pprof.Do(healthCtx, profileLabels, e.runHealthChecks) })
	return e, nil
}

// ProfileLabel and ProfileName are the CPU profile label every goroutine
// of the emulator carries, so that a profile of a test that runs it in
// process (BenchmarkScale) tells the emulator's CPU from the code's under
// test.
const (
	ProfileLabel = "process"
	ProfileName  = "ociemu"
)

// profileLabels are that label, for pprof.Do; the work request timers run
// outside the goroutines the servers start, and carry it too.
var profileLabels = pprof.Labels(ProfileLabel, ProfileName)

func newEmulator(opts Options) *Emulator {
	return &Emulator{
		opts:          opts.withDefaults(),
		keys:          map[string]*signer{},
		sessionSecret: []byte(rand.Text()),
		instances:     map[string]*instanceCert{},
		unpermitted:   map[string]bool{},
		balancers:     map[string]*balancer{},
		compute:       compute{instances: map[string]*Instance{}, privateIPs: map[string]*privateIPRecord{}},
		workRequests:  map[string]*workRequest{},
		retryTokens:   map[string]retryEntry{},
		counters:      newCounters(),
		pendingTimers: map[*time.Timer]struct{}{},
		health:        map[healthKey]*backendHealth{},
	}
}

// URL is the plain HTTP endpoint, to be set as an SDK client's Host.
func (e *Emulator) URL() string { return "http://" + e.httpListener.Addr().String() }

// HTTPSURL is the HTTPS endpoint; clients must trust CACertPEM.
func (e *Emulator) HTTPSURL() string { return "https://" + e.httpsListener.Addr().String() }

// CACertPEM is the CA certificate that signed the HTTPS endpoint's certificate.
func (e *Emulator) CACertPEM() []byte { return e.ca.certPEM }

// TLSClientConfig trusts only the emulator's CA.
func (e *Emulator) TLSClientConfig() *tls.Config {
	pool := x509.NewCertPool()
	pool.AddCert(e.ca.cert)
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
}

// HTTPClient is an *http.Client for the HTTPS endpoint, suitable as an SDK
// client's BaseClient.HTTPClient.
func (e *Emulator) HTTPClient() *http.Client {
	return &http.Client{
		Timeout:   30 * time.Second,
		Transport: &http.Transport{TLSClientConfig: e.TLSClientConfig(), ForceAttemptHTTP2: true},
	}
}

// Close stops serving, stops pending work request timers and health
// checks, and closes forwarders. Work requests still in flight stay as they are.
func (e *Emulator) Close() error {
	e.mu.Lock()
	e.closed = true
	for t := range e.pendingTimers {
		t.Stop()
	}
	e.pendingTimers = nil
	forwarders := e.forwarders
	e.forwarders = nil
	e.mu.Unlock()
	for _, f := range forwarders {
		f.close()
	}
	if e.stopHealth != nil {
		e.stopHealth()
		e.probes.Wait()
	}
	var errs []error
	if e.server != nil {
		errs = append(errs, e.server.Close(), e.tlsServer.Close())
	}
	e.mu.Lock()
	identityServers := e.identityServers
	e.identityServers = nil
	e.mu.Unlock()
	for _, s := range identityServers {
		errs = append(errs, s.Close())
	}
	return errors.Join(errs...)
}
