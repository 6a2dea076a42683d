// Package e2e proves the product end to end: a real kube-apiserver calls the
// webhooks over TLS with the CA bundle package certs produced, and a real
// kubectl shows the result. Tests that only read and write their own objects
// share one API server; tests that break or replace the webhooks get their own.
package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/peppy-ratio/lbregistrar/test/kube"
)

var (
	sharedOnce    sync.Once
	sharedCluster *kube.Cluster
	sharedErr     error

	lbregistrarBinary = program{name: "lbregistrar", module: ".", pkg: "./cmd/lbregistrar"}
	// test/manifests, a module of its own: it reads the Helm chart and the
	// monitoring files with Helm's and Prometheus' libraries.
	manifestsBinary = program{name: "manifests", module: "test/manifests", pkg: "."}
)

func TestMain(m *testing.M) {
	code := m.Run()
	for _, c := range []*kube.Cluster{sharedCluster, memoryCluster} {
		if c != nil {
			if err := c.Stop(); err != nil {
				fmt.Fprintln(os.Stderr, "stopping an API server:", err)
			}
		}
	}
	for _, p := range []*program{&lbregistrarBinary, &manifestsBinary} {
		if p.dir != "" {
			_ = os.RemoveAll(p.dir)
		}
	}
	os.Exit(code)
}

// lbregistrar builds the command once and returns its path.
func lbregistrar(t testing.TB) string { return lbregistrarBinary.build(t) }

// program is a command the tests build once, from package pkg of the
// module in directory module of the repository.
type program struct {
	name, module, pkg string

	once sync.Once
	dir  string // contains the binary; removed by TestMain
	err  error
}

// build builds the program the first time and returns its path.
func (p *program) build(t testing.TB) string {
	t.Helper()
	p.once.Do(func() {
		var root string
		if root, p.err = kube.FindRoot(); p.err != nil {
			return
		}
		if p.dir, p.err = os.MkdirTemp("", "lbregistrar-e2e-"); p.err != nil {
			return
		}
		// Long enough to compile a module's dependencies with nothing cached.
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(p.dir, p.name), p.pkg)
		cmd.Dir = filepath.Join(root, p.module)
		if out, err := cmd.CombinedOutput(); err != nil {
			p.err = fmt.Errorf("go build %s in %s: %w\n%s", p.pkg, p.module, err, out)
		}
	})
	if p.err != nil {
		t.Fatal(p.err)
	}
	return filepath.Join(p.dir, p.name)
}

// shared is one API server with the CRD and webhooks installed, started by
// the first test that needs it; tests using it must only touch objects they
// named themselves.
func shared(t testing.TB) *kube.Cluster {
	t.Helper()
	sharedOnce.Do(func() {
		sharedCluster, sharedErr = kube.StartEnv(context.Background(), kube.Options{})
	})
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	return sharedCluster
}

func testContext(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// failLast returns a function that fails t with a message once the test's
// cleanups have run, so the message is the last thing the test prints,
// after the logs a failing test dumps: CI shows a run's tail.
func failLast(t *testing.T) func(string) {
	var mu sync.Mutex
	var msgs []string
	t.Cleanup(func() {
		for _, m := range msgs {
			t.Error(m)
		}
	})
	return func(m string) {
		t.Fail()
		mu.Lock()
		defer mu.Unlock()
		msgs = append(msgs, m)
	}
}

// kubectl runs bin/kubectl and fails the test when it fails.
func kubectl(t testing.TB, c *kube.Cluster, stdin string, args ...string) (stdout, stderr string) {
	t.Helper()
	stdout, stderr, err := c.Kubectl(testContext(t), stdin, args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s%s", strings.Join(args, " "), err, stdout, stderr)
	}
	return stdout, stderr
}

func testdata(t *testing.T, name string) string {
	t.Helper()
	return readRootFile(t, filepath.Join("test", "testdata", name))
}

// readRootFile is the file name of the repository.
func readRootFile(t *testing.T, name string) string {
	t.Helper()
	root, err := kube.FindRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// object parses YAML or JSON into a generic map.
func object(t *testing.T, doc string) map[string]any {
	t.Helper()
	var obj map[string]any
	if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
		t.Fatalf("parsing %q: %v", doc, err)
	}
	return obj
}
