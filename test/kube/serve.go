package kube

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"syscall"
	"time"
)

// ServeProcess is `lbregistrar serve` run as a process against a Cluster,
// on free local ports; the tests and make run use it.
type ServeProcess struct {
	WebhookAddr, HealthAddr, MetricsAddr string

	// SecureMetrics serves /metrics and /debug/lanes over HTTPS to
	// authorized callers only, as a Deployment does. Off, they are plain
	// HTTP to anyone, so a person running make run, and tests about other
	// things, can read them with no token.
	SecureMetrics bool

	cmd  *exec.Cmd
	done chan struct{}
	err  error // how the process exited, once done is closed
}

// NewServeProcess picks the process's addresses.
func NewServeProcess() (*ServeProcess, error) {
	p := &ServeProcess{}
	for _, addr := range []*string{&p.WebhookAddr, &p.HealthAddr, &p.MetricsAddr} {
		var err error
		if *addr, err = FreeAddress(); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// URL is the webhook server's base URL.
func (p *ServeProcess) URL() string { return "https://" + p.WebhookAddr }

// Start runs binary serve with kubeconfig, the harness's namespace, the
// process's addresses and args, writing its log to out. The process does
// not outlive the caller's, even when that one is killed.
func (p *ServeProcess) Start(binary, kubeconfig string, out io.Writer, args ...string) error {
	p.cmd = exec.Command(binary, append([]string{"serve", "--kubeconfig", kubeconfig, "--namespace", Namespace,
		"--webhook-addr", p.WebhookAddr, "--health-addr", p.HealthAddr, "--metrics-addr", p.MetricsAddr,
		"--metrics-secure=" + strconv.FormatBool(p.SecureMetrics)}, args...)...)
	p.cmd.Stdout, p.cmd.Stderr = out, out
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := p.cmd.Start(); err != nil {
		return err
	}
	p.done = make(chan struct{})
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	return nil
}

// Done is closed when the process has exited.
func (p *ServeProcess) Done() <-chan struct{} { return p.done }

// Err is how the process exited (nil for status 0), once Done is closed.
func (p *ServeProcess) Err() error {
	<-p.done
	return p.err
}

// Terminate asks the process to shut down, as the kubelet does, and returns
// at once.
func (p *ServeProcess) Terminate() error { return p.cmd.Process.Signal(syscall.SIGTERM) }

// Readyz is the status of GET /readyz, or 0 when nothing answers.
func (p *ServeProcess) Readyz() int {
	resp, err := http.Get("http://" + p.HealthAddr + "/readyz")
	if err != nil {
		return 0
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

// WaitReady waits until /readyz answers 200, the process exits or ctx ends.
func (p *ServeProcess) WaitReady(ctx context.Context) error {
	for p.Readyz() != http.StatusOK {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-p.done:
			return errors.New("lbregistrar serve exited")
		case <-time.After(200 * time.Millisecond):
		}
	}
	return nil
}

// Stop asks the process to shut down gracefully, and kills it after 30 s.
func (p *ServeProcess) Stop() {
	_ = p.Terminate()
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// FreeAddress is a 127.0.0.1 address with a port free at the time of the call.
func FreeAddress() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}
