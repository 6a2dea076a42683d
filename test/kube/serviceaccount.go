package kube

import (
	"context"
	"fmt"
	"path/filepath"

	"k8s.io/client-go/tools/clientcmd"
)

// ServiceAccountKubeconfig applies the RBAC config/ installs for lbregistrar
// and returns a kubeconfig that acts as its service account, so a process
// run with it shows those grants are enough.
func (c *Cluster) ServiceAccountKubeconfig(ctx context.Context) (string, error) {
	for _, dir := range []string{"config/rbac", "config/builtin-certs"} {
		if _, stderr, err := c.Kubectl(ctx, "", "apply", "-k", filepath.Join(c.Root, dir)); err != nil {
			return "", fmt.Errorf("applying %s: %w: %s", dir, err, stderr)
		}
	}
	return c.KubeconfigAs("system:serviceaccount:"+Namespace+":lbregistrar", "lbregistrar.kubeconfig")
}

// KubeconfigAs writes a kubeconfig named file beside the admin one that
// impersonates user, so a process run with it has only the rights bound to
// user, and returns its path.
func (c *Cluster) KubeconfigAs(user, file string) (string, error) {
	cfg, err := clientcmd.LoadFromFile(c.Kubeconfig)
	if err != nil {
		return "", err
	}
	for _, auth := range cfg.AuthInfos {
		auth.Impersonate = user
	}
	path := filepath.Join(filepath.Dir(c.Kubeconfig), file)
	return path, clientcmd.WriteToFile(*cfg, path)
}
