package kube

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// StartControllerManager runs kube-controller-manager (built by make
// test-assets beside kube-apiserver) against the cluster with only the
// controllers named (such as "deployment-controller"), until t ends; there
// is no kubelet and no scheduler, so the tests play the kubelet's part.
// Its log is dir/kube-controller-manager.log, shown when t fails.
func (c *Cluster) StartControllerManager(t testing.TB, controllers ...string) {
	t.Helper()
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		assets = filepath.Join(c.Root, "bin")
	}
	logPath := filepath.Join(c.dir, "kube-controller-manager.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(assets, "kube-controller-manager"),
		"--kubeconfig="+c.Kubeconfig, "--controllers="+strings.Join(controllers, ","),
		"--leader-elect=false", "--secure-port=0", "--use-service-account-credentials=false",
		"--kube-api-qps=100", "--kube-api-burst=200", "--v=1")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		t.Fatalf("starting kube-controller-manager (run `make test-assets`): %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		logFile.Close()
		if t.Failed() {
			if out, err := os.ReadFile(logPath); err == nil {
				t.Logf("kube-controller-manager's log:\n%s", tail(string(out), 60))
			}
		}
	})
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{fmt.Sprintf("[%d lines before]", len(lines)-n)}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}
