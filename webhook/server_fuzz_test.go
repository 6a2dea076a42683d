package webhook_test

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/peppy-ratio/lbregistrar/api"
	"github.com/peppy-ratio/lbregistrar/conversion"
	"github.com/peppy-ratio/lbregistrar/webhook"
)

const (
	alphaObject = `{"apiVersion":"nodes.peppy-ratio.dev/v1alpha1","kind":"LBRegistrar","metadata":{"name":"a"},` +
		`"spec":{"loadBalancerId":"ocid1.loadbalancer.oc1.ap-tokyo-1.aaaa","backendSetName":"b","nodePort":30080}}`
	goodReview = `{"kind":"ConversionReview","apiVersion":"apiextensions.k8s.io/v1","request":{"uid":"u-1",` +
		`"desiredAPIVersion":"nodes.peppy-ratio.dev/v1beta1","objects":[` + alphaObject + `]}}`
	admission = `{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":"u-1","operation":"CREATE",` +
		`"userInfo":{"username":"u"},"object":` + alphaObject + `}}`
)

// FuzzServer sends arbitrary requests (path, headers and body) to the
// webhook server with every handler serve registers, over TLS as the API
// server does. Whatever arrives, the server answers or closes the
// connection, never panics and never answers 500, and answers a
// well-formed review sent next correctly.
func FuzzServer(f *testing.F) {
	f.Add(conversion.Path, "Content-Type: application/json", []byte(goodReview))
	f.Add(conversion.Path, "Content-Length: 1099511627776", []byte(goodReview))
	f.Add(conversion.Path, "Content-Length: -1", []byte(goodReview))
	f.Add(conversion.Path, "Content-Length: 10", []byte(goodReview))
	f.Add(conversion.Path, "Transfer-Encoding: chunked", []byte("5\r\n{\"a\":\r\n0\r\n\r\n"))
	f.Add(conversion.Path, "Content-Encoding: gzip", []byte("\x1f\x8b\x08\x00"))
	f.Add(webhook.ValidateV1alpha1Path, "", []byte(admission))
	f.Add(webhook.ValidateV1beta1Path, "Expect: 100-continue", []byte(admission))
	f.Add("/", "X-A: "+strings.Repeat("a", 1<<10), []byte(strings.Repeat("[", 10000)))

	srv, cfg := startServer(f, webhook.ServerOptions{MaxRequestBytes: 1 << 20, MemoryBudget: 48 << 20})
	var panicked atomic.Value
	guard := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer func() {
				if p := recover(); p != nil {
					panicked.Store(fmt.Sprint(p))
					panic(p)
				}
			}()
			h.ServeHTTP(w, r)
		})
	}
	scheme := api.NewScheme()
	converter, err := conversion.NewConverter(scheme)
	if err != nil {
		f.Fatal(err)
	}
	cache := fake.NewClientBuilder().WithScheme(scheme).Build()
	secrets := webhook.IdentityPolicy{Reviewer: cache}
	srv.Register(conversion.Path, guard(conversion.NewHandler(scheme, converter)))
	srv.Register(webhook.ValidateV1alpha1Path, guard(webhook.NewV1alpha1Validator(cache, secrets, "controller")))
	srv.Register(webhook.ValidateV1beta1Path, guard(webhook.NewV1beta1Validator(cache, secrets, "controller")))
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: 10 * time.Second}

	f.Fuzz(func(t *testing.T, path, headers string, body []byte) {
		if status := exchange(t, srv.Addr().String(), cfg, path, headers, body); status == http.StatusInternalServerError {
			t.Errorf("answered 500")
		}
		if p := panicked.Load(); p != nil {
			t.Fatalf("a handler panicked: %v", p)
		}
		resp, err := client.Post("https://"+srv.Addr().String()+conversion.Path, "application/json", strings.NewReader(goodReview))
		if err != nil {
			t.Fatalf("a well-formed review afterwards: %v", err)
		}
		answer, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !bytes.Contains(answer, []byte(`"status":"Success"`)) {
			t.Fatalf("a well-formed review afterwards: %d %s", resp.StatusCode, answer)
		}
	})
}

// exchange writes one raw request and returns the status of the answer, or
// 0 when the connection closed without one.
func exchange(t *testing.T, addr string, cfg *tls.Config, path, headers string, body []byte) int {
	conn, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	request := "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n" + strings.ReplaceAll(headers, "\n", "\r\n") + "\r\n\r\n" + string(body)
	go func() {
		// All of the request, then its end: a body shorter than it claims
		// is cut short at once rather than waited for.
		_, _ = io.WriteString(conn, request)
		_ = conn.CloseWrite()
	}()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return 0
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}
