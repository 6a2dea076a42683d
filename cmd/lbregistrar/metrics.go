package main

import (
	"crypto/tls"
	"net"
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	authenticationv1 "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationv1 "k8s.io/client-go/kubernetes/typed/authorization/v1"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/peppy-ratio/lbregistrar/webhook"
	"github.com/peppy-ratio/lbregistrar/webhook/connlimit"
	"github.com/peppy-ratio/lbregistrar/webhook/tokenauth"
)

// metricsManager is a manager whose metrics server is serve's own, on a
// listener bound before the manager starts: controller-runtime's binds only
// once the manager runs and does not tell which port it got, so --metrics-addr
// with port 0 could not be reported. Components add their handlers
// (/debug/lanes) with AddMetricsServerExtraHandler, as to controller-runtime's.
type metricsManager struct {
	manager.Manager
	mux    *http.ServeMux
	filter metricsserver.Filter // nil: anyone may read
}

// withMetricsServer serves /metrics and the extra handlers on l. Secure, it
// speaks HTTPS (TLS as the webhook server's, HTTP/1.1 only, a self-signed
// certificate made here) and answers only callers whose bearer token the API
// server accepts (TokenReview, see tokenauth) and who may get the path
// (SubjectAccessReview, accepted for 5 minutes, denied for 30 s).
func (o *serveOptions) withMetricsServer(mgr manager.Manager, cfg *rest.Config, l *connlimit.Listener) (manager.Manager, error) {
	m := &metricsManager{Manager: mgr, mux: http.NewServeMux()}
	var served net.Listener = l
	if o.metricsSecure {
		filter, err := metricsFilter(cfg, mgr.GetHTTPClient())
		if err != nil {
			return nil, err
		}
		m.filter = filter
		tlsConfig, err := selfSignedTLS()
		if err != nil {
			return nil, err
		}
		served = tls.NewListener(l, tlsConfig)
	}
	metrics := promhttp.HandlerFor(crmetrics.Registry, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError})
	if err := m.AddMetricsServerExtraHandler("/metrics", metrics); err != nil {
		return nil, err
	}
	return m, mgr.Add(&manager.Server{Name: "metrics", Server: newHTTPServer(l, m.mux, true), Listener: served})
}

// metricsFilter authenticates and authorizes scrapers with the API server,
// on clients whose rate limit (reviewQPS) is their own: what callers of the
// metrics port make the API server do stays apart from the controller's
// own requests.
func metricsFilter(cfg *rest.Config, httpClient *http.Client) (metricsserver.Filter, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst, cfg.RateLimiter = reviewQPS, 2*reviewQPS, nil
	authn, err := authenticationv1.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	authz, err := authorizationv1.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	authorizer, err := authorizerfactory.DelegatingAuthorizerConfig{
		SubjectAccessReviewClient: authz,
		AllowCacheTTL:             5 * time.Minute,
		DenyCacheTTL:              30 * time.Second,
		WebhookRetryBackoff:       &wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5},
	}.New()
	if err != nil {
		return nil, err
	}
	return tokenauth.New(authn.TokenReviews(), tokenauth.Defaults).Filter(authorizer), nil
}

// reviewQPS bounds the token and access reviews the metrics port sends; a
// review of a made-up token is limited further (tokenauth.Defaults).
const reviewQPS = 10

// AddMetricsServerExtraHandler serves handler at path, behind the filter.
func (m *metricsManager) AddMetricsServerExtraHandler(path string, handler http.Handler) error {
	if m.filter != nil {
		var err error
		if handler, err = m.filter(m.GetLogger().WithValues("path", path), handler); err != nil {
			return err
		}
	}
	m.mux.Handle(path, handler)
	return nil
}

// selfSignedTLS is the metrics server's TLS: scrapers skip verifying its
// certificate, for localhost and 127.0.0.1; the token is what is checked.
func selfSignedTLS() (*tls.Config, error) {
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("localhost", []net.IP{net.IPv4(127, 0, 0, 1)}, nil)
	if err != nil {
		return nil, err
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{pair}, NextProtos: []string{"http/1.1"}}
	webhook.SecureTLS(cfg)
	return cfg, nil
}
