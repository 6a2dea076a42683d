package webhook

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/peppy-ratio/lbregistrar/webhook/connlimit"
)

// ServerOptions configure the webhook server.
type ServerOptions struct {
	// Addr is host:port to listen on; port 0 picks a free one (see Addr).
	Addr string

	// Certificate provides the serving certificate for each handshake, so a
	// renewed certificate is served without a restart. The server runs it.
	Certificate CertificateSource

	// EnableHTTP2 offers HTTP/2. It is off by default: the API server talks
	// HTTP/1.1 to webhooks, and HTTP/2 has had denial-of-service flaws
	// (rapid reset, CONTINUATION floods) that HTTP/1.1 does not share. On,
	// a connection carries at most maxStreams requests at once.
	EnableHTTP2 bool

	// MaxRequestBytes bounds a request body. The largest request is a
	// ConversionReview of a whole list; the default allows thousands of
	// objects.
	MaxRequestBytes int64

	// RequestTimeout bounds reading a request and writing its response. The
	// API server waits at most 30 s for a webhook.
	RequestTimeout time.Duration

	// MemoryBudget bounds the memory requests in flight may take together
	// (see budget); requests past it wait, then are answered 503. It must
	// fit one request of MaxRequestBytes.
	MemoryBudget int64

	// MaxConnections bounds the connections open at once, and
	// MaxConnectionsPerSource those from one address (see connlimit): a
	// connection that serves no request (handshaking, sending its headers,
	// idle) is closed to make room for a new one, so only requests being
	// served can make a caller wait.
	MaxConnections          int
	MaxConnectionsPerSource int

	// ClientCAFile, when set, is a PEM bundle of the CAs whose client
	// certificates may call the webhooks: every path but those in
	// AnonymousPaths answers 403 to a caller without one, and a quarter of
	// the memory budget is kept for callers with one (see budget). The API server
	// presents the certificate its AdmissionConfiguration names to
	// admission webhooks, but none to conversion webhooks (kubernetes
	// issue 131810), so the handshake asks for a certificate without
	// requiring one, and the paths decide.
	ClientCAFile string

	// AnonymousPaths are served without a client certificate when
	// ClientCAFile is set.
	AnonymousPaths []string
}

// Defaults for ServerOptions left zero.
const (
	DefaultMaxRequestBytes         = 16 << 20
	DefaultRequestTimeout          = 30 * time.Second
	DefaultMemoryBudget            = 160 << 20
	DefaultMaxConnections          = 256
	DefaultMaxConnectionsPerSource = 64
)

// Limits of every connection, whatever the options: headers arrive within
// headerTimeout, which bounds the TLS handshake too (the API server's
// requests take milliseconds for both); they are at most maxHeaderBytes
// (the API server sends under 1 KiB, and many tiny header lines cost about
// fifteen times their size once parsed); an idle connection is closed after
// idleTimeout unless a new one closed it before.
const (
	headerTimeout  = 5 * time.Second
	maxHeaderBytes = 8 << 10
	idleTimeout    = 90 * time.Second
	maxStreams     = 16
)

// CertificateSource provides the serving certificate and keeps it current
// while Start runs.
//
// The server runs its source for as long as it serves, rather than leaving it
// to the manager's other runnables: the manager starts webhook servers, then
// waits for its caches, and only then starts the rest. Listing LBRegistrars
// stored in an older version needs this very server's conversion webhook, so
// a source started after the caches would wait for itself forever.
type CertificateSource interface {
	Start(ctx context.Context) error
	GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error)
}

// SecureTLS restricts cfg to TLS 1.2 or later and, at TLS 1.2, to ECDHE key
// exchange with AEAD ciphers (AES-GCM, ChaCha20-Poly1305), the set
// kube-apiserver recommends: CBC suites have had padding-oracle and timing
// attacks, and RSA key exchange has no forward secrecy. TLS 1.3 suites are
// all AEAD and not configurable.
func SecureTLS(cfg *tls.Config) {
	cfg.MinVersion = tls.VersionTLS12
	cfg.CipherSuites = []uint16{
		tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
		tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
		tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
		tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
		tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
		tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
	}
}

// Server is the webhook server: HTTPS only, TLS as SecureTLS sets it, bounded
// request size, time, connections and memory, one certificate source, and
// metrics per path. It implements controller-runtime's webhook.Server so the
// manager runs it and the builders register on it.
type Server struct {
	opts      ServerOptions
	listener  *connlimit.Listener
	budget    *budget
	clientCAs *x509.CertPool // nil: no client authentication
	mux       *http.ServeMux
	started   atomic.Bool
}

var _ crwebhook.Server = (*Server)(nil)

// NewServer listens on opts.Addr at once, so the address is known (Addr)
// before the webhook configurations that point at it are written.
func NewServer(opts ServerOptions) (*Server, error) {
	if opts.Certificate == nil {
		return nil, errors.New("webhook: a certificate source is required")
	}
	if opts.MaxRequestBytes == 0 {
		opts.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if opts.RequestTimeout == 0 {
		opts.RequestTimeout = DefaultRequestTimeout
	}
	if opts.MemoryBudget == 0 {
		opts.MemoryBudget = DefaultMemoryBudget
	}
	if opts.MaxConnections == 0 {
		opts.MaxConnections = DefaultMaxConnections
	}
	if opts.MaxConnectionsPerSource == 0 {
		opts.MaxConnectionsPerSource = DefaultMaxConnectionsPerSource
	}
	var clientCAs *x509.CertPool
	var reserve int64
	if opts.ClientCAFile != "" {
		reserve = opts.MemoryBudget / 4
		pem, err := os.ReadFile(opts.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("webhook: client CA: %w", err)
		}
		clientCAs = x509.NewCertPool()
		if !clientCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("webhook: client CA %s contains no PEM certificate", opts.ClientCAFile)
		}
	}
	budget, err := newBudget(opts.MemoryBudget, opts.MaxRequestBytes, reserve)
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", opts.Addr)
	if err != nil {
		return nil, err
	}
	limited := connlimit.Listen(l, connlimit.Limits{Name: "webhook", Max: opts.MaxConnections, PerSource: opts.MaxConnectionsPerSource})
	return &Server{opts: opts, listener: limited, budget: budget, clientCAs: clientCAs, mux: http.NewServeMux()}, nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() net.Addr { return s.listener.Addr() }

// NeedLeaderElection is false: every replica serves.
func (*Server) NeedLeaderElection() bool { return false }

// Register serves hook at path to authenticated callers (see ClientCAFile)
// within the memory budget, instrumented with the request metrics.
func (s *Server) Register(path string, hook http.Handler) {
	labels := prometheus.Labels{"path": path}
	hook = s.budget.limit(hook)
	if s.clientCAs != nil && !slices.Contains(s.opts.AnonymousPaths, path) {
		hook = requireClientCertificate(hook)
	}
	h := promhttp.InstrumentHandlerInFlight(requestsInFlight.With(labels),
		promhttp.InstrumentHandlerDuration(requestDuration.MustCurryWith(labels),
			promhttp.InstrumentHandlerCounter(requestsTotal.MustCurryWith(labels), hook)))
	s.mux.Handle(path, h)
}

// WebhookMux is the mux the hooks are registered on.
func (s *Server) WebhookMux() *http.ServeMux { return s.mux }

// Start runs the certificate source and serves until ctx ends, then lets
// requests in flight finish.
func (s *Server) Start(ctx context.Context) error {
	log := logf.FromContext(ctx).WithName("webhook-server")
	certCtx, stopCert := context.WithCancel(ctx)
	certDone := make(chan error, 1)
	go func() { certDone <- s.opts.Certificate.Start(certCtx) }()
	cfg := &tls.Config{
		GetCertificate: s.opts.Certificate.GetCertificate,
		NextProtos:     []string{"http/1.1"},
	}
	if s.opts.EnableHTTP2 {
		cfg.NextProtos = []string{"h2", "http/1.1"}
	}
	if s.clientCAs != nil {
		cfg.ClientAuth, cfg.ClientCAs = tls.VerifyClientCertIfGiven, s.clientCAs
	}
	SecureTLS(cfg)
	srv := &http.Server{
		Handler:           http.MaxBytesHandler(s.mux, s.opts.MaxRequestBytes),
		TLSConfig:         cfg,
		ReadHeaderTimeout: headerTimeout,
		ReadTimeout:       s.opts.RequestTimeout,
		WriteTimeout:      s.opts.RequestTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		HTTP2:             &http.HTTP2Config{MaxConcurrentStreams: maxStreams},
		BaseContext:       func(net.Listener) context.Context { return ctx },
		// Failed handshakes and the like go to the structured log.
		ErrorLog: slog.NewLogLogger(logr.ToSlogHandler(log), slog.LevelWarn),
	}
	if !s.opts.EnableHTTP2 {
		// A non-nil, empty map is how net/http is told not to offer HTTP/2.
		srv.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){}
	}
	s.listener.Configure(srv)

	done := make(chan struct{})
	go func() {
		defer close(done)
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), s.opts.RequestTimeout)
		defer cancel()
		if err := srv.Shutdown(shutdown); err != nil {
			log.Error(err, "shutting down the webhook server")
		}
	}()

	log.Info("serving webhooks", "addr", s.listener.Addr().String())
	s.started.Store(true)
	err := srv.ServeTLS(s.listener, "", "")
	if errors.Is(err, http.ErrServerClosed) {
		<-done
		err = nil
	}
	stopCert()
	return errors.Join(err, <-certDone)
}

// requireClientCertificate answers 403 to a caller whose connection
// presented no client certificate that the handshake verified.
func requireClientCertificate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 {
			http.Error(w, "a client certificate signed by the webhook's client CA is required", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// StartedChecker is healthy once the server accepts connections.
func (s *Server) StartedChecker() healthz.Checker {
	return func(*http.Request) error {
		if !s.started.Load() {
			return errors.New("webhook server not started yet")
		}
		return nil
	}
}

var (
	requestsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "lbregistrar_webhook_requests_total",
		Help: "Webhook requests by path and HTTP status code.",
	}, []string{"path", "code"})
	requestDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "lbregistrar_webhook_request_duration_seconds",
		Help:    "Webhook request latency by path.",
		Buckets: []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10},
	}, []string{"path"})
	requestsInFlight = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "lbregistrar_webhook_requests_in_flight",
		Help: "Webhook requests being served, by path.",
	}, []string{"path"})
)

func init() {
	crmetrics.Registry.MustRegister(requestsTotal, requestDuration, requestsInFlight)
}
