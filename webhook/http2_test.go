package webhook_test

import (
	"bytes"
	"crypto/tls"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/peppy-ratio/lbregistrar/webhook"
)

// With HTTP/2 on, one connection that opens streams and resets them at once
// (rapid reset, CVE-2023-44487), and one that opens far more streams than
// allowed and never finishes them, cannot make the server run more than 16
// requests for either, nor keep another caller from being answered within
// a second.
func TestHTTP2FloodsLeaveOthersServed(t *testing.T) {
	srv, cfg := startServer(t, webhook.ServerOptions{EnableHTTP2: true})
	addr := srv.Addr().String()
	h2 := cfg.Clone()
	h2.NextProtos = []string{"h2"}

	var maxInFlight atomic.Int64
	stop := make(chan struct{})
	defer close(stop)
	flood := func(reset bool) {
		conn, err := tls.Dial("tcp", addr, h2)
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close()
		go func() { // the server's frames, read so its writes do not block
			framer := http2.NewFramer(nil, conn)
			for {
				if _, err := framer.ReadFrame(); err != nil {
					return
				}
			}
		}()
		var block bytes.Buffer
		enc := hpack.NewEncoder(&block)
		for _, f := range [][2]string{{":method", "POST"}, {":scheme", "https"}, {":authority", "127.0.0.1"}, {":path", "/echo"}} {
			_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
		}
		if _, err := conn.Write([]byte(http2.ClientPreface)); err != nil {
			t.Error(err)
			return
		}
		framer := http2.NewFramer(conn, nil)
		if err := framer.WriteSettings(); err != nil {
			t.Error(err)
			return
		}
		for id := uint32(1); id < 40000; id += 2 {
			select {
			case <-stop:
				return
			default:
			}
			if err := framer.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block.Bytes(), EndHeaders: true}); err != nil {
				return // the server gave up on the connection
			}
			if reset {
				if err := framer.WriteRSTStream(id, http2.ErrCodeCancel); err != nil {
					return
				}
			}
		}
	}
	go flood(true)
	go flood(false)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
			inFlight := echoInFlight()
			for old := maxInFlight.Load(); inFlight > old && !maxInFlight.CompareAndSwap(old, inFlight); old = maxInFlight.Load() {
			}
		}
	}()

	client := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: 5 * time.Second}
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		start := time.Now()
		resp, err := client.Post("https://"+addr+"/echo", "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatalf("another caller, during the floods: %v", err)
		}
		_ = resp.Body.Close()
		if took := time.Since(start); resp.StatusCode != http.StatusOK || took > time.Second {
			t.Errorf("another caller, during the floods: %d after %s", resp.StatusCode, took)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Each flooding connection runs at most 16, and the caller's one.
	if got := maxInFlight.Load(); got > 2*16+1 {
		t.Errorf("up to %d requests in flight at once, past 16 for each flooding connection", got)
	}
}

// echoInFlight is the server's lbregistrar_webhook_requests_in_flight for
// /echo.
func echoInFlight() int64 {
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		return 0
	}
	for _, f := range families {
		if f.GetName() != "lbregistrar_webhook_requests_in_flight" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "path" && l.GetValue() == "/echo" {
					return int64(m.GetGauge().GetValue())
				}
			}
		}
	}
	return 0
}
