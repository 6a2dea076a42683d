package kube

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
)

// InstallCertManagerCRDs installs cert-manager's CustomResourceDefinitions,
// as shipped in the cert-manager module the project requires, so that the
// cert-manager objects in config/ can be applied and read. Only the CRDs:
// nothing issues certificates.
func (c *Cluster) InstallCertManagerCRDs(ctx context.Context) error {
	cmd := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", "github.com/cert-manager/cert-manager")
	cmd.Dir = c.Root
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("locating the cert-manager module: %w", err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "deploy", "crds")
	if _, stderr, err := c.Kubectl(ctx, "", "apply", "--server-side", "-f", dir); err != nil {
		return fmt.Errorf("installing cert-manager CRDs from %s: %w: %s", dir, err, stderr)
	}
	_, stderr, err := c.Kubectl(ctx, "", "wait", "--for=condition=Established", "--timeout=60s", "-f", dir)
	if err != nil {
		return fmt.Errorf("waiting for cert-manager CRDs: %w: %s", err, stderr)
	}
	return nil
}
