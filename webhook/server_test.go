package webhook_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/peppy-ratio/lbregistrar/certs"
	"github.com/peppy-ratio/lbregistrar/webhook"
)

// startServer serves an echo hook at /echo with a fresh certificate for
// 127.0.0.1 and returns a client trusting it.
func startServer(t *testing.T, opts webhook.ServerOptions) (*webhook.Server, *tls.Config) {
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
	opts.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return &cert, nil }
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
	for srv.StartedChecker()(nil) != nil {
		time.Sleep(10 * time.Millisecond)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	return srv, &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS10}
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
