package webhook_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/peppy-ratio/lbregistrar/certs"
	"github.com/peppy-ratio/lbregistrar/test/eventually"
	"github.com/peppy-ratio/lbregistrar/test/kube"
	"github.com/peppy-ratio/lbregistrar/webhook"
)

// startServer serves an echo hook at /echo with a fresh certificate for
// 127.0.0.1 and returns a client trusting it.
func startServer(t testing.TB, opts webhook.ServerOptions) (*webhook.Server, *tls.Config) {
	t.Helper()
	ca, err := certs.NewCA("test", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := ca.IssueServing([]string{"127.0.0.1"}, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(pair.CertPEM, pair.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	opts.Addr = "127.0.0.1:0"
	opts.Certificate = &loadedOnStart{cert: &cert}
	srv, err := webhook.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv.Register("/echo", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
			return
		}
		_, _ = w.Write(body)
	}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- srv.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	eventually.Passes(t, 10*time.Second, 10*time.Millisecond, func() error { return srv.StartedChecker()(nil) })
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	return srv, &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS10}
}

// loadedOnStart has a certificate to serve only once Start runs, like the
// sources of package certs.
type loadedOnStart struct {
	cert   *tls.Certificate
	loaded atomic.Pointer[tls.Certificate]
}

func (c *loadedOnStart) Start(ctx context.Context) error {
	c.loaded.Store(c.cert)
	<-ctx.Done()
	return nil
}

func (c *loadedOnStart) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if cert := c.loaded.Load(); cert != nil {
		return cert, nil
	}
	return nil, errors.New("not started")
}

// The server runs its certificate source: the manager starts webhook
// servers before it waits for its caches, and those may need this server's
// conversion webhook, so nothing else can be relied on to start the source.
func TestServerRunsItsCertificateSource(t *testing.T) {
	srv, cfg := startServer(t, webhook.ServerOptions{})
	conn, err := tls.Dial("tcp", srv.Addr().String(), cfg)
	if err != nil {
		t.Fatalf("handshake with nothing but the server running: %v", err)
	}
	_ = conn.Close()
}

func TestServerRefusesTLSBelow1_2(t *testing.T) {
	srv, cfg := startServer(t, webhook.ServerOptions{})
	cfg.MaxVersion = tls.VersionTLS11
	if conn, err := tls.Dial("tcp", srv.Addr().String(), cfg); err == nil {
		_ = conn.Close()
		t.Fatal("a TLS 1.1 handshake succeeded")
	}
}

func TestServerOffersHTTP2OnlyWhenAsked(t *testing.T) {
	for _, enable := range []bool{false, true} {
		srv, cfg := startServer(t, webhook.ServerOptions{EnableHTTP2: enable})
		cfg.NextProtos = []string{"h2", "http/1.1"}
		conn, err := tls.Dial("tcp", srv.Addr().String(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		got := conn.ConnectionState().NegotiatedProtocol
		_ = conn.Close()
		if (got == "h2") != enable {
			t.Errorf("EnableHTTP2=%v: negotiated %q", enable, got)
		}
	}
}

func TestServerBoundsTheRequestBody(t *testing.T) {
	srv, cfg := startServer(t, webhook.ServerOptions{MaxRequestBytes: 1024})
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
	for size, want := range map[int]int{1024: http.StatusOK, 1025: http.StatusRequestEntityTooLarge} {
		resp, err := client.Post("https://"+srv.Addr().String()+"/echo", "application/json", strings.NewReader(strings.Repeat("x", size)))
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("%d-byte body: status %d, want %d", size, resp.StatusCode, want)
		}
	}
}

func TestServerOffersOnlyAEADSuitesAtTLS1_2(t *testing.T) {
	srv, cfg := startServer(t, webhook.ServerOptions{})
	cfg.MaxVersion = tls.VersionTLS12
	for suite, want := range map[uint16]bool{
		tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256:       true,
		tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384:       true,
		tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256: true,
		tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA:          false,
		tls.TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA:          false,
		tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256:       false,
	} {
		cfg.CipherSuites = []uint16{suite}
		conn, err := tls.Dial("tcp", srv.Addr().String(), cfg)
		if err == nil {
			_ = conn.Close()
		}
		if (err == nil) != want {
			t.Errorf("a client offering only %s: handshake error %v", tls.CipherSuiteName(suite), err)
		}
	}
}

// With a client CA, the handshake asks for a client certificate and the
// paths decide: a caller without one is answered 403 everywhere but on the
// anonymous paths (conversion: the API server has no certificate for it),
// and one whose certificate the CA signed is served. Without a client CA,
// anyone is served.
func TestServerAuthenticatesClients(t *testing.T) {
	apiServer, err := kube.NewClientCertificate("kube-apiserver")
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(t.TempDir(), "client-ca.crt")
	if err := os.WriteFile(caFile, apiServer.CAPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(apiServer.CertPEM, apiServer.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	post := func(srv *webhook.Server, cfg *tls.Config, path string) int {
		client := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
		resp, err := client.Post("https://"+srv.Addr().String()+path, "application/json", strings.NewReader("{}"))
		if err != nil {
			return 0
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	srv, cfg := startServer(t, webhook.ServerOptions{ClientCAFile: caFile, AnonymousPaths: []string{"/open"}})
	srv.Register("/open", http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	withCert := cfg.Clone()
	withCert.Certificates = []tls.Certificate{pair}
	for _, tc := range []struct {
		name string
		cfg  *tls.Config
		path string
		want int
	}{
		{"no certificate", cfg, "/echo", http.StatusForbidden},
		{"no certificate, anonymous path", cfg, "/open", http.StatusOK},
		{"the API server's certificate", withCert, "/echo", http.StatusOK},
	} {
		if got := post(srv, tc.cfg, tc.path); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
	open, openCfg := startServer(t, webhook.ServerOptions{})
	if got := post(open, openCfg, "/echo"); got != http.StatusOK {
		t.Errorf("without a client CA, no certificate: %d", got)
	}

	other, err := kube.NewClientCertificate("someone")
	if err != nil {
		t.Fatal(err)
	}
	otherPair, err := tls.X509KeyPair(other.CertPEM, other.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	withOther := cfg.Clone()
	withOther.Certificates = []tls.Certificate{otherPair}
	if got := post(srv, withOther, "/echo"); got == http.StatusOK {
		t.Errorf("a certificate another CA signed: served")
	}
}
