package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/peppy-ratio/lbregistrar/test/kube"
)

// serveProcess is `lbregistrar serve` run as a process against a test API
// server, on free local ports.
type serveProcess struct {
	webhookAddr, healthAddr, metricsAddr string
}

func newServeProcess(t *testing.T) *serveProcess {
	return &serveProcess{webhookAddr: freeAddr(t), healthAddr: freeAddr(t), metricsAddr: freeAddr(t)}
}

func (p *serveProcess) url() string { return "https://" + p.webhookAddr }

// start runs the binary with args added, and stops it with SIGINT when the
// test ends, showing its log if the test failed.
func (p *serveProcess) start(t *testing.T, c *kube.Cluster, args ...string) {
	t.Helper()
	var logs bytes.Buffer
	cmd := exec.Command(lbregistrar(t), append([]string{"serve", "--kubeconfig", c.Kubeconfig, "--namespace", kube.Namespace,
		"--webhook-addr", p.webhookAddr, "--health-addr", p.healthAddr, "--metrics-addr", p.metricsAddr}, args...)...)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("lbregistrar serve:\n%s", logs.String())
		}
	})
}

// readyz is the status of GET /readyz, or 0 when nothing answers.
func (p *serveProcess) readyz() int {
	resp, err := http.Get("http://" + p.healthAddr + "/readyz")
	if err != nil {
		return 0
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

func (p *serveProcess) waitReady(t *testing.T) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); p.readyz() != http.StatusOK; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("lbregistrar serve not ready after 30 s")
		}
	}
}

func (p *serveProcess) assertMetrics(t *testing.T, series ...string) {
	t.Helper()
	resp, err := http.Get("http://" + p.metricsAddr + "/metrics")
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

// freeAddr is a 127.0.0.1 address with a port free at the time of the call.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return fmt.Sprintf("127.0.0.1:%d", l.Addr().(*net.TCPAddr).Port)
}
