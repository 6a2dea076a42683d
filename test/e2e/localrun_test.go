package e2e

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/peppy-ratio/lbregistrar/test/kube"
)

// TestLocalRun runs make run's program to the point where every sample is
// registered in the emulated load balancers (the pod-target one by its
// pods' addresses) and a request has gone through one of them to a
// registered node address, then lets it stop.
func TestLocalRun(t *testing.T) {
	t.Parallel()
	root, err := kube.FindRoot()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "run", "./cmd/localrun", "-check", "-timeout", "4m", "-lbregistrar", lbregistrar(t))
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("localrun: %v\n%s", err, out)
	}
	assertNothingLeft(t, string(out))
	for _, want := range []string{
		"Warning: nodes.peppy-ratio.dev/v1alpha1 LBRegistrar is deprecated",
		"lbregistrar-ingress-https   True",
		"edge-fixed-port             True",
		"shop-web-pods               True",
		"10.1.0.21:8080 w1, 10.1.0.22:8080 w1",
		"-> served by node-",
		`GET /debug/lanes: {"time":`,
		`"leader":true`,
		`lbregistrar_backends_registered{backend_set="ingress",lbregistrar="lbregistrar-ingress-https"} 2`,
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// assertNothingLeft checks that the run removed its API server's directory
// and left no process that still uses it.
func assertNothingLeft(t *testing.T, out string) {
	t.Helper()
	m := regexp.MustCompile(`kubeconfig: (\S+)/kubeconfig`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no kubeconfig path in the output:\n%s", out)
	}
	if _, err := os.Stat(m[1]); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s is still there after the run (%v)", m[1], err)
	}
	procs, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range procs {
		cmdline, err := os.ReadFile(p)
		if err == nil && strings.Contains(string(cmdline), m[1]) {
			t.Errorf("a process still uses %s: %s", m[1], strings.ReplaceAll(string(cmdline), "\x00", " "))
		}
	}
}
