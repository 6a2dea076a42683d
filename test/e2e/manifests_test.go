package e2e

import (
	"context"
	"strings"
	"testing"

	"github.com/peppy-ratio/lbregistrar/test/kube"
)

// TestInstallManifests renders each install overlay with kubectl's kustomize
// and applies it to a real API server with server-side dry-run, so every
// object is checked by the API server's own validation.
func TestInstallManifests(t *testing.T) {
	t.Parallel()
	c := kube.Start(t, kube.Options{Bare: true})
	ctx := context.Background()
	if err := c.InstallCertManagerCRDs(ctx); err != nil {
		t.Fatal(err)
	}
	// A dry-run create of the namespace does not make it exist for the
	// objects inside it.
	if _, stderr, err := c.Kubectl(ctx, "", "create", "namespace", kube.Namespace); err != nil {
		t.Fatalf("creating the namespace: %v: %s", err, stderr)
	}
	for _, overlay := range []string{"default", "with-cert-manager"} {
		t.Run(overlay, func(t *testing.T) {
			rendered, stderr, err := c.Kubectl(ctx, "", "kustomize", c.Root+"/config/"+overlay)
			if err != nil {
				t.Fatalf("kustomize: %v: %s", err, stderr)
			}
			out, stderr, err := c.Kubectl(ctx, rendered, "apply", "--server-side", "--dry-run=server", "-f", "-")
			if err != nil {
				t.Fatalf("apply --dry-run=server: %v\n%s%s", err, out, stderr)
			}
			for _, kind := range []string{"customresourcedefinition", "deployment", "poddisruptionbudget", "validatingwebhookconfiguration", "service/", "serviceaccount", "clusterrole"} {
				if !strings.Contains(out, kind) {
					t.Errorf("no %s applied:\n%s", kind, out)
				}
			}
		})
	}
}
