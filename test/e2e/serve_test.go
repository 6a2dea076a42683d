package e2e

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/peppy-ratio/lbregistrar/test/eventually"
	"github.com/peppy-ratio/lbregistrar/test/kube"
	"github.com/peppy-ratio/lbregistrar/test/ociemu"
)

// serveProcess is kube.ServeProcess with the test's life: started by the
// test, stopped when it ends, its log shown if it failed.
type serveProcess struct {
	*kube.ServeProcess
	log *processLog
}

// processLog is a process's output, which the test may read while the
// process writes it.
type processLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *processLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *processLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func newServeProcess() serveProcess { return serveProcess{&kube.ServeProcess{}, &processLog{}} }

// serveAdmitting starts serve for c, signing with API keys from
// lbregistrar-system and reaching OCI at emu, with args besides, and
// returns once it is ready and the API server admits through it.
func serveAdmitting(t testing.TB, c *kube.Cluster, emu *ociemu.Emulator, args ...string) serveProcess {
	t.Helper()
	serve := newServeProcess()
	serve.startAdmitting(t, c, emu, args...)
	return serve
}

// startAdmitting is serveAdmitting with a process the caller set up.
func (p serveProcess) startAdmitting(t testing.TB, c *kube.Cluster, emu *ociemu.Emulator, args ...string) {
	t.Helper()
	p.startInstalled(t, c, c.Kubeconfig, nil, append([]string{"--webhook-host=127.0.0.1", "--secret-namespaces=" + kube.Namespace,
		"--oci-loadbalancer-endpoint=" + emu.URL(), "--oci-networkloadbalancer-endpoint=" + emu.URL(), "--oci-core-endpoint=" + emu.URL()}, args...)...)
	p.waitReady(t)
	if err := c.WaitAdmitting(testContext(t)); err != nil {
		t.Fatal(err)
	}
}

// startInstalled installs the CRD and the validating webhooks, starts the
// process as kubeconfig with args, and points the webhooks at it, trusting
// caBundle (none: the one the process publishes). Until it listens they
// point at kube.UnreachableURL.
func (p serveProcess) startInstalled(t testing.TB, c *kube.Cluster, kubeconfig string, caBundle []byte, args ...string) {
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
func (p serveProcess) startAs(t testing.TB, kubeconfig string, args ...string) {
	t.Helper()
	p.launch(t, kubeconfig, args...)
	p.waitListening(t)
}

// launch is startAs without waiting until the process listens.
func (p serveProcess) launch(t testing.TB, kubeconfig string, args ...string) {
	t.Helper()
	if err := p.Start(lbregistrar(t), kubeconfig, p.log, args...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("lbregistrar serve:\n%s", p.log.String())
		}
	})
}

// waitLogged waits until the process has logged text n times.
func (p serveProcess) waitLogged(t *testing.T, n int, text string) {
	t.Helper()
	eventually.Passes(t, 30*time.Second, 100*time.Millisecond, func() error {
		if got := strings.Count(p.log.String(), text); got < n {
			return fmt.Errorf("%q logged %d of %d times", text, got, n)
		}
		return nil
	})
}

func (p serveProcess) waitListening(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(testContext(t), 30*time.Second)
	defer cancel()
	if err := p.WaitListening(ctx); err != nil {
		t.Fatal(err)
	}
}

// pointWebhooksAt points the CRD's conversion webhook and the validating
// webhooks at url, trusting caBundle (none: the one already there).
func pointWebhooksAt(t testing.TB, c *kube.Cluster, url string, caBundle []byte) {
	t.Helper()
	if err := c.PointWebhooksAt(testContext(t), url, caBundle); err != nil {
		t.Fatal(err)
	}
}

func (p serveProcess) waitReady(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(testContext(t), 30*time.Second)
	defer cancel()
	if err := p.WaitReady(ctx); err != nil {
		t.Fatalf("lbregistrar serve not ready: %v", err)
	}
}

func (p serveProcess) assertMetrics(t *testing.T, series ...string) {
	t.Helper()
	metrics := p.scrape(t)
	for _, s := range series {
		if !strings.Contains(metrics, s) {
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
