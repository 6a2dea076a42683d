package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/peppy-ratio/lbregistrar/test/kube"
)

// Every sample in config/samples is accepted by the real API server with the
// webhooks in place (server-side dry-run, so samples that claim the same
// backend sets do not refuse each other), with no warning for the v1beta1
// ones. A cluster of its own: the samples' names are the seed's, which other
// tests use for other load balancers.
func TestSamplesApply(t *testing.T) {
	t.Parallel()
	c := kube.Start(t, kube.Options{})
	paths, err := filepath.Glob(filepath.Join(c.Root, "config", "samples", "*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no samples: %v", err)
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			manifest, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			_, stderr := kubectl(t, c, string(manifest), "apply", "--dry-run=server", "-f", "-")
			if strings.HasPrefix(filepath.Base(path), "v1beta1") && strings.Contains(stderr, "Warning") {
				t.Errorf("a v1beta1 sample drew warnings:\n%s", stderr)
			}
		})
	}
}
