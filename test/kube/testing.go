package kube

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

var setLogger sync.Once

// Start starts a Cluster for a test and stops it when the test ends. The
// webhook manager's logs are discarded unless LBREGISTRAR_TEST_VERBOSE is set.
func Start(t testing.TB, o Options) *Cluster {
	t.Helper()
	setLogger.Do(func() {
		log := logr.Discard()
		if os.Getenv("LBREGISTRAR_TEST_VERBOSE") != "" {
			log = funcr.New(func(prefix, args string) { fmt.Fprintln(os.Stderr, prefix, args) }, funcr.Options{Verbosity: 1})
		}
		logf.SetLogger(log)
	})
	c, err := StartEnv(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("stopping the API server: %v", err)
		}
	})
	return c
}
