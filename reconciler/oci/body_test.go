package oci_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	goruntime "runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/peppy-ratio/lbregistrar/reconciler/oci"
)

// overlong answers every GET with 256 MiB, as a broken or hostile endpoint
// might, saying so in its Content-Length or not.
type overlong struct{ declare bool }

func (o overlong) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil || req.Method != http.MethodGet {
		return resp, err
	}
	_ = resp.Body.Close()
	const size = 256 << 20
	resp.Body = io.NopCloser(io.MultiReader(strings.NewReader(`{"name":"`), io.LimitReader(endless{}, size)))
	resp.ContentLength = -1
	resp.Header.Del("Content-Length")
	if o.declare {
		resp.ContentLength = size
		resp.Header.Set("Content-Length", strconv.Itoa(size))
	}
	return resp, nil
}

type endless struct{}

func (endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'a'
	}
	return len(p), nil
}

// The SDK reads every answer whole, so what it may read of one is bounded:
// an answer of 256 MiB fails with an error that says why, after reading a
// few MiB or none, and is not retried at once.
func TestResponseBodiesAreBounded(t *testing.T) {
	for name, declare := range map[string]bool{"unknown length": false, "declared length": true} {
		t.Run(name, func(t *testing.T) {
			_, c := emulatorClientOver(t, true, &http.Client{Transport: overlong{declare: declare}})
			var before, after goruntime.MemStats
			goruntime.ReadMemStats(&before)
			_, err := c.GetBackendSet(context.Background(), lbID, "api")
			goruntime.ReadMemStats(&after)
			var tooLarge *oci.ResponseTooLargeError
			if !errors.As(err, &tooLarge) {
				t.Fatalf("err = %v, want a ResponseTooLargeError", err)
			}
			if _, _, retry := oci.Retryable(err); retry {
				t.Errorf("retryable: %v", err)
			}
			if allocated := after.TotalAlloc - before.TotalAlloc; allocated > 64<<20 {
				t.Errorf("reading the answer allocated %d MiB", allocated>>20)
			}
		})
	}
}
