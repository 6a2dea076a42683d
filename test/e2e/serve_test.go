package e2e

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/peppy-ratio/lbregistrar/test/kube"
)

// serveProcess is kube.ServeProcess with the test's life: started by the
// test, stopped when it ends, its log shown if it failed.
type serveProcess struct {
	*kube.ServeProcess
}

func newServeProcess(t *testing.T) serveProcess {
	t.Helper()
	p, err := kube.NewServeProcess()
	if err != nil {
		t.Fatal(err)
	}
	return serveProcess{p}
}

// start runs the binary with args added, and stops it when the test ends,
// showing its log if the test failed.
func (p serveProcess) start(t *testing.T, c *kube.Cluster, args ...string) {
	t.Helper()
	p.startAs(t, c.Kubeconfig, args...)
}

// startAs is start connecting with kubeconfig.
func (p serveProcess) startAs(t *testing.T, kubeconfig string, args ...string) {
	t.Helper()
	var logs bytes.Buffer
	if err := p.Start(lbregistrar(t), kubeconfig, &logs, args...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("lbregistrar serve:\n%s", logs.String())
		}
	})
}

// install points the CRD's conversion webhook and the validating webhooks
// at the process, trusting caBundle (none: the process publishes its own).
func (p serveProcess) install(t *testing.T, c *kube.Cluster, caBundle []byte) {
	t.Helper()
	if err := c.PointWebhooksAt(testContext(t), p.URL(), caBundle); err != nil {
		t.Fatal(err)
	}
}

func (p serveProcess) waitReady(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(testContext(t), 30*time.Second)
	defer cancel()
	if err := p.WaitReady(ctx); err != nil {
		t.Fatalf("lbregistrar serve not ready: %v", err)
	}
}

func (p serveProcess) assertMetrics(t *testing.T, series ...string) {
	t.Helper()
	resp, err := http.Get("http://" + p.MetricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range series {
		if !bytes.Contains(metrics, []byte(s)) {
			t.Errorf("/metrics has no %s", s)
		}
	}
}
