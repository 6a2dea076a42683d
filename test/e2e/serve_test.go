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

func newServeProcess() serveProcess { return serveProcess{&kube.ServeProcess{}} }

// startInstalled installs the CRD and the validating webhooks, starts the
// process as kubeconfig with args, and points the webhooks at it, trusting
// caBundle (none: the one the process publishes). Until it listens they
// point at kube.UnreachableURL.
func (p serveProcess) startInstalled(t *testing.T, c *kube.Cluster, kubeconfig string, caBundle []byte, args ...string) {
	t.Helper()
	pointWebhooksAt(t, c, kube.UnreachableURL, caBundle)
	p.startAs(t, kubeconfig, args...)
	pointWebhooksAt(t, c, p.URL(), caBundle)
}

// start runs the binary with args added and waits until it listens; it is
// stopped when the test ends, its log shown if the test failed.
func (p serveProcess) start(t *testing.T, c *kube.Cluster, args ...string) {
	t.Helper()
	p.startAs(t, c.Kubeconfig, args...)
}

// startAs is start connecting with kubeconfig.
func (p serveProcess) startAs(t *testing.T, kubeconfig string, args ...string) {
	t.Helper()
	p.launch(t, kubeconfig, args...)
	p.waitListening(t)
}

// launch is startAs without waiting until the process listens.
func (p serveProcess) launch(t *testing.T, kubeconfig string, args ...string) {
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

func (p serveProcess) waitListening(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(testContext(t), 30*time.Second)
	defer cancel()
	if err := p.WaitListening(ctx); err != nil {
		t.Fatal(err)
	}
}

// pointWebhooksAt points the CRD's conversion webhook and the validating
// webhooks at url, trusting caBundle (none: the one already there).
func pointWebhooksAt(t *testing.T, c *kube.Cluster, url string, caBundle []byte) {
	t.Helper()
	if err := c.PointWebhooksAt(testContext(t), url, caBundle); err != nil {
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

// newServiceProxy is a kube.ServiceProxy closed when the test ends.
func newServiceProxy(t *testing.T) *kube.ServiceProxy {
	t.Helper()
	service, err := kube.NewServiceProxy()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = service.Close() })
	return service
}
