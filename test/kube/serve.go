package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ServeProcess is `lbregistrar serve` run as a process against a Cluster,
// listening on 127.0.0.1 at ports it picks itself and reports, so no other
// process can take them first; the tests and make run use it.
type ServeProcess struct {
	// The addresses the process listens on, named as in its
	// --addresses-file, once WaitListening has returned.
	WebhookAddr string `json:"webhook"`
	HealthAddr  string `json:"health"`
	MetricsAddr string `json:"metrics"`

	// SecureMetrics serves /metrics and /debug/lanes over HTTPS to
	// authorized callers only, as a Deployment does. Off, they are plain
	// HTTP to anyone, so a person running make run, and tests about other
	// things, can read them with no token.
	SecureMetrics bool `json:"-"`

	// Env is added to the process's environment.
	Env []string `json:"-"`

	dir  string // has the addresses file while the process runs
	cmd  *exec.Cmd
	done chan struct{}
	err  error // how the process exited, once done is closed
}

// URL is the webhook server's base URL.
func (p *ServeProcess) URL() string { return "https://" + p.WebhookAddr }

// Start runs binary serve with kubeconfig, the harness's namespace, every
// listener on port 0 and args, writing its log to out, and returns at once
// (see WaitListening). The process does not outlive the caller's, even when
// that one is killed.
func (p *ServeProcess) Start(binary, kubeconfig string, out io.Writer, args ...string) error {
	dir, err := os.MkdirTemp("", "lbregistrar-serve-")
	if err != nil {
		return err
	}
	p.dir = dir
	p.cmd = exec.Command(binary, append([]string{"serve", "--kubeconfig", kubeconfig, "--namespace", Namespace,
		"--webhook-addr", "127.0.0.1:0", "--health-addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0",
		"--addresses-file", p.addressesFile(), "--metrics-secure=" + strconv.FormatBool(p.SecureMetrics)}, args...)...)
	p.cmd.Stdout, p.cmd.Stderr = out, out
	p.cmd.Env = append(os.Environ(), p.Env...)
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := p.cmd.Start(); err != nil {
		_ = os.RemoveAll(dir)
		return err
	}
	p.done = make(chan struct{})
	go func() {
		p.err = p.cmd.Wait()
		_ = os.RemoveAll(dir)
		close(p.done)
	}()
	return nil
}

func (p *ServeProcess) addressesFile() string { return filepath.Join(p.dir, "addresses.json") }

// WaitListening waits until the process reports the addresses it listens
// on, and sets them. It fails when the process exits or ctx ends first, and
// when the report lacks a listener: serve writes it whole, so a report seen
// is a complete one.
func (p *ServeProcess) WaitListening(ctx context.Context) error {
	for {
		data, err := os.ReadFile(p.addressesFile())
		switch {
		case err == nil:
			if err := json.Unmarshal(data, p); err != nil {
				return fmt.Errorf("lbregistrar serve's addresses %q: %w", data, err)
			}
			if p.WebhookAddr == "" || p.HealthAddr == "" || p.MetricsAddr == "" {
				return fmt.Errorf("lbregistrar serve's addresses %q lack a listener", data)
			}
			return nil
		case !errors.Is(err, fs.ErrNotExist):
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for lbregistrar serve to listen: %w", ctx.Err())
		case <-p.done:
			return fmt.Errorf("lbregistrar serve exited before it listened: %w", p.err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// PID is the running process's.
func (p *ServeProcess) PID() int { return p.cmd.Process.Pid }

// PeakRSS is the most memory the running process has had resident
// (VmHWM of /proc/<pid>/status), in bytes.
func (p *ServeProcess) PeakRSS() (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(data)) {
		if kb, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(kb), " kB"), 10, 64)
			return n << 10, err
		}
	}
	return 0, errors.New("no VmHWM in /proc/<pid>/status")
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
