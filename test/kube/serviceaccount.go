package kube

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
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

// AllowWorkloadIdentity applies config/workload-identity, the opt-in Role
// that lets lbregistrar request tokens of the ServiceAccounts of Namespace
// it names, with serviceAccounts added to its list as an overlay's patch
// would add them.
func (c *Cluster) AllowWorkloadIdentity(ctx context.Context, serviceAccounts ...string) error {
	if _, stderr, err := c.Kubectl(ctx, "", "apply", "-k", filepath.Join(c.Root, "config/workload-identity")); err != nil {
		return fmt.Errorf("applying config/workload-identity: %w: %s", err, stderr)
	}
	for _, name := range serviceAccounts {
		patch := `[{"op": "add", "path": "/rules/0/resourceNames/-", "value": "` + name + `"}]`
		if _, stderr, err := c.Kubectl(ctx, "", "-n", Namespace, "patch", "role", "lbregistrar-workload-identity", "--type=json", "-p", patch); err != nil {
			return fmt.Errorf("listing ServiceAccount %s: %w: %s", name, err, stderr)
		}
	}
	return nil
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

// TokenReviewer answers whose service account token is, as the API server
// c reaches says (a TokenReview): what OKE's workload identity proxy asks
// its cluster, for the emulator's ServeWorkloadIdentity.
func TokenReviewer(c client.Client) func(ctx context.Context, token string) (string, error) {
	return func(ctx context.Context, token string) (string, error) {
		review := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}
		if err := c.Create(ctx, review); err != nil {
			return "", err
		}
		if !review.Status.Authenticated {
			return "", errors.New("token not authenticated: " + review.Status.Error)
		}
		return review.Status.User.Username, nil
	}
}
