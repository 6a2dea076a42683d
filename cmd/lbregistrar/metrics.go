package main

import (
	"crypto/tls"

	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/peppy-ratio/lbregistrar/webhook"
)

// metricsOptions configure the server of /metrics and /debug/lanes. Secure,
// it speaks HTTPS (TLS as the webhook server's, HTTP/1.1 only, a certificate
// of its own made at start) and answers only callers whose bearer token the
// API server accepts (TokenReview) and who may get the path
// (SubjectAccessReview); both are cached for a few minutes.
func (o *serveOptions) metricsOptions() metricsserver.Options {
	opts := metricsserver.Options{BindAddress: o.metricsAddr}
	if o.metricsSecure {
		opts.SecureServing = true
		opts.FilterProvider = filters.WithAuthenticationAndAuthorization
		opts.TLSOpts = []func(*tls.Config){webhook.SecureTLS, func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }}
	}
	return opts
}
