package e2e

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/peppy-ratio/lbregistrar/test/kube"
)

// TestInstallManifests renders each way to install (the kustomize overlays
// of config/ with kubectl's kustomize, and the Helm chart as helm template
// renders it) and applies it to a real API server with server-side dry-run,
// so every object is checked by the API server's own validation, the
// cert-manager and prometheus-operator ones against those projects' CRDs.
func TestInstallManifests(t *testing.T) {
	t.Parallel()
	c := kube.Start(t, kube.Options{Bare: true})
	ctx := context.Background()
	if err := c.InstallCertManagerCRDs(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.InstallPrometheusOperatorCRDs(ctx); err != nil {
		t.Fatal(err)
	}
	// A dry-run create of a namespace does not make it exist for the
	// objects inside it; team-a is one of the chart's secretNamespaces in
	// every-value.yaml.
	for _, namespace := range []string{kube.Namespace, "team-a"} {
		if _, stderr, err := c.Kubectl(ctx, "", "create", "namespace", namespace); err != nil {
			t.Fatalf("creating namespace %s: %v: %s", namespace, err, stderr)
		}
	}
	installs := map[string]func(t *testing.T) string{}
	for _, overlay := range []string{"default", "with-cert-manager", "prometheus"} {
		installs["kustomize config/"+overlay] = func(t *testing.T) string {
			rendered, stderr, err := c.Kubectl(ctx, "", "kustomize", c.Root+"/config/"+overlay)
			if err != nil {
				t.Fatalf("kustomize: %v: %s", err, stderr)
			}
			return rendered
		}
	}
	installs["helm chart at its defaults"] = func(t *testing.T) string { return renderChart(t, "") }
	installs["helm chart with every-value.yaml"] = func(t *testing.T) string { return renderChart(t, "every-value.yaml") }
	for name, render := range installs {
		t.Run(name, func(t *testing.T) {
			rendered := render(t)
			out, stderr, err := c.Kubectl(ctx, rendered, "apply", "--server-side", "--dry-run=server", "-f", "-")
			if err != nil {
				t.Fatalf("apply --dry-run=server: %v\n%s%s", err, out, stderr)
			}
			for _, applied := range appliedNames(t, rendered) {
				if !strings.Contains(out, applied+" serverside-applied") {
					t.Errorf("%s not applied:\n%s", applied, out)
				}
			}
		})
	}
}

// appliedNames are the names kubectl apply reports the objects of manifest
// by: kind.group/name.
func appliedNames(t *testing.T, manifest string) []string {
	t.Helper()
	var names []string
	for doc := range strings.SplitSeq(manifest, "\n---") {
		var obj struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatalf("parsing %q: %v", doc, err)
		}
		if obj.Kind == "" {
			continue
		}
		resource := strings.ToLower(obj.Kind)
		if group, _, grouped := strings.Cut(obj.APIVersion, "/"); grouped {
			resource += "." + group
		}
		names = append(names, resource+"/"+obj.Metadata.Name)
	}
	if len(names) == 0 {
		t.Fatal("nothing rendered")
	}
	return names
}

// renderChart renders charts/lbregistrar as helm template does, into
// kube.Namespace, with a values file of test/manifests/testdata (none: the
// chart's defaults).
func renderChart(t *testing.T, values string) string {
	t.Helper()
	args := []string{"render-chart"}
	if values != "" {
		args = append(args, "-f", filepath.Join("test/manifests/testdata", values))
	}
	return runManifests(t, "", args...)
}

// runManifests runs test/manifests' command in the repository root with
// stdin as its input, returns what it prints, and fails the test when it
// fails.
func runManifests(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	root, err := kube.FindRoot()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(testContext(t), manifestsBinary.build(t), append([]string{"-root", root}, args...)...)
	cmd.Dir = root
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("manifests %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String()
}

// TestServiceAccountPrivileges applies the shipped RBAC and asks the API
// server what lbregistrar's service account may do: what the code needs and
// nothing around it. (make run and its test run serve as this account, which
// shows the grants are enough.) Tokens of ServiceAccounts, which would let
// it sign in to OCI as any workload of its namespaces, come only with the
// opt-in config/workload-identity, for the ServiceAccounts it lists.
func TestServiceAccountPrivileges(t *testing.T) {
	t.Parallel()
	c := kube.Start(t, kube.Options{Bare: true})
	ctx := context.Background()
	if _, stderr, err := c.Kubectl(ctx, "", "create", "namespace", kube.Namespace); err != nil {
		t.Fatalf("creating the namespace: %v: %s", err, stderr)
	}
	for _, dir := range []string{"config/crd", "config/rbac", "config/builtin-certs"} {
		if _, stderr, err := c.Kubectl(ctx, "", "apply", "-k", c.Root+"/"+dir); err != nil {
			t.Fatalf("applying %s: %v: %s", dir, err, stderr)
		}
	}
	as := "--as=system:serviceaccount:" + kube.Namespace + ":lbregistrar"
	canI := func(args []string, allow bool) {
		t.Helper()
		out, _, err := c.Kubectl(ctx, "", append([]string{"auth", "can-i", as}, args...)...)
		if allowed := err == nil && strings.TrimSpace(out) == "yes"; allowed != allow {
			t.Errorf("can-i %s = %v, want %v", strings.Join(args, " "), allowed, allow)
		}
	}
	token := func(serviceAccount string) []string {
		return []string{"create", "serviceaccounts/" + serviceAccount, "--subresource=token", "-n", kube.Namespace}
	}
	const leaderElectionID = "lbregistrar.nodes.peppy-ratio.dev"
	for _, tc := range []struct {
		args  []string
		allow bool
	}{
		{[]string{"watch", "lbregistrars.nodes.peppy-ratio.dev"}, true},
		{[]string{"get", "lbregistrars.nodes.peppy-ratio.dev"}, true},
		{[]string{"patch", "lbregistrars.nodes.peppy-ratio.dev"}, true},
		{[]string{"patch", "lbregistrars.nodes.peppy-ratio.dev", "--subresource=status"}, true},
		{[]string{"list", "nodes"}, true},
		{[]string{"list", "services", "-A"}, true},
		{[]string{"watch", "endpointslices.discovery.k8s.io", "-A"}, true},
		{[]string{"create", "events.events.k8s.io", "-n", "default"}, true},
		{[]string{"create", "events.events.k8s.io", "-n", "shop"}, true}, // about gated pods, in their namespace
		{[]string{"patch", "pods", "-n", "shop", "--subresource=status"}, true},
		{[]string{"create", "subjectaccessreviews.authorization.k8s.io"}, true},
		{[]string{"get", "leases.coordination.k8s.io/" + leaderElectionID, "-n", kube.Namespace}, true},
		{[]string{"update", "leases.coordination.k8s.io/" + leaderElectionID, "-n", kube.Namespace}, true},
		{[]string{"create", "leases.coordination.k8s.io", "-n", kube.Namespace}, true},
		{[]string{"get", "secrets", "-n", kube.Namespace}, true},
		{[]string{"update", "secrets/" + kube.CertSecret, "-n", kube.Namespace}, true},
		{[]string{"get", "validatingwebhookconfigurations/" + kube.ValidatingWebhook}, true},
		{[]string{"update", "validatingwebhookconfigurations/" + kube.ValidatingWebhook}, true},
		{[]string{"get", "customresourcedefinitions/" + kube.CRDName}, true},
		{[]string{"update", "customresourcedefinitions/" + kube.CRDName}, true},
		{[]string{"create", "tokenreviews.authentication.k8s.io"}, true},
		{[]string{"create", "subjectaccessreviews.authorization.k8s.io"}, true},

		// Only the calls the code makes: patches, not updates, of
		// LBRegistrars; no owned objects; cached reads; events of the
		// events.k8s.io API only; the CA bundle written into lbregistrar's
		// own objects only; of pods, their status patched and nothing else.
		{[]string{"update", "lbregistrars.nodes.peppy-ratio.dev"}, false},
		{[]string{"update", "lbregistrars.nodes.peppy-ratio.dev", "--subresource=status"}, false},
		{[]string{"update", "lbregistrars.nodes.peppy-ratio.dev", "--subresource=finalizers"}, false},
		{[]string{"get", "nodes/any"}, false},
		{[]string{"get", "services/any", "-n", "default"}, false},
		{[]string{"create", "events", "-n", "default"}, false},
		{[]string{"delete", "events.events.k8s.io", "-n", "shop"}, false},
		{[]string{"patch", "pods", "-n", "shop"}, false},
		{[]string{"update", "pods", "-n", "shop", "--subresource=status"}, false},
		{[]string{"patch", "secrets/" + kube.CertSecret, "-n", kube.Namespace}, false},
		{[]string{"patch", "validatingwebhookconfigurations/" + kube.ValidatingWebhook}, false},
		{[]string{"get", "validatingwebhookconfigurations/other"}, false},
		{[]string{"list", "validatingwebhookconfigurations"}, false},
		{[]string{"get", "customresourcedefinitions/other.example.com"}, false},
		{[]string{"list", "customresourcedefinitions"}, false},
		{[]string{"get", "secrets", "-n", "kube-system"}, false},
		{[]string{"list", "secrets", "-A"}, false},
		{[]string{"update", "secrets/other", "-n", kube.Namespace}, false},
		{[]string{"delete", "lbregistrars.nodes.peppy-ratio.dev"}, false},
		{[]string{"update", "nodes"}, false},
		{[]string{"update", "services", "-n", "default"}, false},
		{[]string{"get", "pods", "-A"}, false},
		{[]string{"list", "endpoints", "-A"}, false},
		{[]string{"update", "validatingwebhookconfigurations/other"}, false},
		{[]string{"update", "customresourcedefinitions/other.example.com"}, false},
		{[]string{"update", "leases.coordination.k8s.io", "-n", "kube-system"}, false},
		{[]string{"update", "leases.coordination.k8s.io/other", "-n", kube.Namespace}, false},
		{[]string{"delete", "leases.coordination.k8s.io/" + leaderElectionID, "-n", kube.Namespace}, false},
		{[]string{"list", "leases.coordination.k8s.io", "-n", kube.Namespace}, false},
		{[]string{"get", "/metrics"}, false}, // lbregistrar-metrics-reader is for scrapers
		{[]string{"watch", "leases.coordination.k8s.io", "-n", kube.Namespace}, false},
		{token("lb-writer"), false},
		{token("lbregistrar"), false},
	} {
		canI(tc.args, tc.allow)
	}

	if err := c.AllowWorkloadIdentity(ctx, "lb-writer"); err != nil {
		t.Fatal(err)
	}
	for sa, allow := range map[string]bool{"lb-writer": true, "lbregistrar": true, "default": false, "other": false} {
		canI(token(sa), allow)
	}
}
