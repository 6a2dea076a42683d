package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peppy-ratio/lbregistrar/test/eventually"
	"github.com/peppy-ratio/lbregistrar/test/kube"
)

// docs/migration.md, typed as written into a cluster the original operator
// ran in (its Deployment, roles, CRD and v1alpha1 objects; the load
// balancers as it registered them): stop it, install with kustomize, wait,
// migrate the storage, merge, validate, apply, delete the old resources
// and the original operator; then docs/releases.md's upgrade and
// docs/operations.md's uninstall. Not one backend set is written from the
// first step to the last, and everything the guide removes is gone.
func TestMigrationGuideAsWritten(t *testing.T) {
	t.Parallel()
	c := kube.Start(t, kube.Options{Bare: true})
	ctx := testContext(t)
	emu, objects := takeoverLeft(t, c)
	kubectl(t, c, testdata(t, "original-operator-install.yaml"), "apply", "-f", "-")
	asLeft := emu.State()
	sh, cluster := newDocShell(t, c), newStandIn(t, c, emu)
	endpoints := "--oci-loadbalancer-endpoint=" + emu.URL() + " --oci-networkloadbalancer-endpoint=" + emu.URL() + " --oci-core-endpoint=" + emu.URL()
	withEndpoints := []string{"plan --kubeconfig ~/.kube/config", "plan --kubeconfig ~/.kube/config " + endpoints}

	// The README's tools, and its plan before installing, which finds
	// nothing to write.
	sh.write(t, "my.yaml", readRootFile(t, "config/samples/v1beta1_multi_service.yaml"))
	sh.write(t, "old.yaml", objects)
	sh.write(t, "old/lbregistrars.yaml", objects)
	sh.run(t, "README.md", "tools", withEndpoints...)
	sh.run(t, "README.md", "plan-before-installing", withEndpoints...)

	sh.run(t, "docs/migration.md", "stop-the-original")
	var original appsv1.Deployment
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: "oci-lb-controller-system", Name: "oci-lb-controller-controller-manager"}, &original); err != nil {
		t.Fatal(err)
	}
	if *original.Spec.Replicas != 0 {
		t.Fatalf("the original operator still has %d replicas", *original.Spec.Replicas)
	}
	if out := sh.run(t, "docs/migration.md", "install"); !strings.Contains(out, "v1alpha1 v1beta1") {
		t.Errorf("the CRD serves %q after the install, want v1alpha1 v1beta1", out)
	}
	cluster.applying(t, func() { sh.run(t, "README.md", "install-kustomize") }) // the same, as the README puts it
	cluster.startReplicas(t)
	if out := sh.run(t, "docs/migration.md", "wait-serving"); !strings.Contains(out, "No resources found") {
		t.Errorf("events of backend set updates after the takeover:\n%s", out)
	}
	sh.run(t, "README.md", "shadow-mode")
	if err := c.InstallPrometheusOperatorCRDs(ctx); err != nil {
		t.Fatal(err)
	}
	kubectl(t, c, "", "create", "namespace", "monitoring")
	sh.run(t, "README.md", "monitoring-kustomize")
	sh.run(t, "docs/operations.md", "network-policy-kustomize")
	if out := sh.run(t, "docs/migration.md", "migrate-storage"); !strings.Contains(out, `["v1beta1"]`) {
		t.Errorf("storedVersions after migrate-storage: %q", out)
	}

	// Section 1 reads the manifests kept in git, and the cluster.
	sh.write(t, "deploy/lbregistrars/lbregistrars.yaml", objects)
	sh.run(t, "docs/migration.md", "migrate-files")
	fromFiles, _ := os.ReadFile(filepath.Join(sh.dir, "merged.yaml"))
	sh.run(t, "docs/migration.md", "migrate-cluster")
	merged, _ := os.ReadFile(filepath.Join(sh.dir, "merged.yaml"))
	if diff := cmp.Diff(replacedBy(t, string(fromFiles)), replacedBy(t, string(merged))); diff != "" {
		t.Errorf("migrate merges the files and the cluster differently (-files +cluster):\n%s", diff)
	}
	sh.run(t, "docs/migration.md", "validate-merged")
	sh.run(t, "docs/migration.md", "apply-merged")
	// The guide's example names the merge of lbregistrar-ingress-https and
	// -http; step 6 deletes what else was merged, once it is Ready.
	var others []string
	for name, old := range replacedBy(t, string(merged)) {
		if name != "lbregistrar-ingress" {
			waitReady(t, c, 1, 2*time.Minute, func(n string) bool { return n == name })
			others = append(others, old...)
		}
	}
	if out := sh.run(t, "docs/migration.md", "keys-of-the-original"); strings.TrimSpace(out) != kube.Namespace {
		t.Errorf("the resources read their keys in %q, want %s alone", out, kube.Namespace)
	}
	sh.run(t, "docs/migration.md", "remove-the-original", "OLD...", strings.Join(others, " "))
	// What the guide promises: every resource Ready, none unable to read
	// its key, and the keys still there.
	waitAllReady(t, c, len(replacedBy(t, string(merged))), 2*time.Minute)
	var secret corev1.Secret
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: kube.Namespace, Name: "oci-api-key"}, &secret); err != nil {
		t.Errorf("the API key's Secret after the migration: %v", err)
	}
	if out, _ := kubectl(t, c, "", "get", "lbregistrars", "-o", "name"); strings.Count(out, "\n") != len(replacedBy(t, string(merged))) {
		t.Errorf("after the migration the cluster has %q, want only the merged resources", out)
	}
	for name, gone := range map[string]client.Object{
		"oci-lb-controller-system":              &corev1.Namespace{},
		"oci-lb-controller-proxy-role":          &rbacv1.ClusterRole{},
		"oci-lb-controller-manager-rolebinding": &rbacv1.ClusterRoleBinding{},
	} {
		if err := c.Client.Get(ctx, client.ObjectKey{Name: name}, gone); !apierrors.IsNotFound(err) {
			t.Errorf("%s %T after the guide removed it: %v", name, gone, err)
		}
	}

	sh.run(t, "docs/releases.md", "plan-upgrade", withEndpoints...)
	cluster.applying(t, func() { sh.run(t, "docs/releases.md", "upgrade-kustomize") })
	sh.run(t, "docs/releases.md", "rolled-out")

	sh.run(t, "docs/operations.md", "uninstall-kustomize")
	assertNoBackendSetUpdates(t, emu, "following the migration guide, upgrading and uninstalling")
	if diff := cmp.Diff(asLeft, emu.State()); diff != "" {
		t.Errorf("OCI changed from the original operator's leaving to the uninstall (-as left +now):\n%s", diff)
	}
}

// The README's Helm install over the original operator's CRD, refused until
// it is marked as the release's and installed as docs/migration.md says; docs/releases.md's upgrade, rollback
// and pinning; the README's API keys in another namespace, read beside
// the release namespace's; docs/operations.md's pause and resume, and its Helm
// uninstall, which keeps the CRD and every resource and writes nothing to
// OCI; and deleting a resource on purpose, which drains and
// removes exactly what plan --delete said it would.
func TestHelmGuideAsWritten(t *testing.T) {
	t.Parallel()
	c := kube.Start(t, kube.Options{Bare: true})
	emu := seededEmulator(t, c.Root+"/test/testdata/old-operator-backends.yaml", 0)
	createWorkload(t, c)
	installOldOperatorCRD(t, c)
	sh, cluster := newDocShell(t, c), newStandIn(t, c, emu)

	sh.run(t, "README.md", "install-helm-namespace")
	kubectl(t, c, apiKeyFor(t, c, emu, testdata(t, "old-operator-objects.yaml")), "apply", "-f", "-")
	asLeft := emu.State()
	if out, err := sh.try(t, "README.md", "install-helm"); err == nil || !strings.Contains(out, "meta.helm.sh/release-name") {
		t.Fatalf("helm installed over a CRD it did not make: %v", err)
	}
	cluster.applying(t, func() { sh.run(t, "docs/migration.md", "adopt-the-crd") })
	cluster.startReplicas(t)
	sh.run(t, "docs/releases.md", "rolled-out")
	sh.run(t, "docs/operations.md", "clear-the-mark", "NAME", "old-node-port")

	// What the monitoring docs add, in the namespace of a Prometheus.
	if err := c.InstallPrometheusOperatorCRDs(testContext(t)); err != nil {
		t.Fatal(err)
	}
	kubectl(t, c, "", "create", "namespace", "monitoring")
	sh.run(t, "docs/operations.md", "metrics-reader")
	sh.run(t, "docs/operations.md", "dashboard")
	cluster.applying(t, func() { sh.run(t, "README.md", "monitoring-helm") })
	cluster.applying(t, func() { sh.run(t, "docs/operations.md", "network-policy-helm") })

	chart := readRootFile(t, "charts/lbregistrar/Chart.yaml")
	version := strings.TrimSpace(strings.SplitN(strings.SplitN(chart, "\nversion:", 2)[1], "\n", 2)[0])
	if out := sh.run(t, "docs/releases.md", "helm-list"); !strings.Contains(out, "lbregistrar-"+version) || !strings.Contains(out, "v"+version) {
		t.Errorf("helm list does not show chart lbregistrar-%s and app version v%s:\n%s", version, version, out)
	}
	cluster.applying(t, func() { sh.run(t, "docs/releases.md", "upgrade-helm") })
	sh.run(t, "docs/releases.md", "rolled-out")
	cluster.applying(t, func() { sh.run(t, "docs/releases.md", "rollback-helm") })
	sh.run(t, "docs/releases.md", "rolled-out")
	assertNoBackendSetUpdates(t, emu, "installing, upgrading and rolling back with Helm")
	if diff := cmp.Diff(asLeft, emu.State()); diff != "" {
		t.Errorf("OCI changed while installing, upgrading and rolling back (-as left +now):\n%s", diff)
	}

	// The README's keys in another namespace: old-node-port's key moves
	// to team-keys, and every resource is Ready again, its keys read in
	// both namespaces.
	cluster.applying(t, func() { sh.run(t, "README.md", "helm-secret-namespaces") })
	sh.run(t, "docs/releases.md", "rolled-out")
	var key corev1.Secret
	if err := c.Client.Get(testContext(t), client.ObjectKey{Namespace: kube.Namespace, Name: "oci-api-key"}, &key); err != nil {
		t.Fatal(err)
	}
	if err := c.Client.Create(testContext(t), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-keys", Name: key.Name}, Data: key.Data}); err != nil {
		t.Fatal(err)
	}
	kubectl(t, c, "", "patch", "lbregistrars.v1alpha1.nodes.peppy-ratio.dev", "old-node-port", "--type=json",
		"-p", `[{"op": "replace", "path": "/spec/apiKey/privateKey/namespace", "value": "team-keys"}]`)
	waitAllReady(t, c, 4, time.Minute)

	// docs/operations.md's pause: a node joins while old-port-alias
	// (old3's alias) is paused, and the others register it, not it;
	// resumed, it has registered the node once the block returns.
	const aliasLB = "ocid1.loadbalancer.oc1.ap-tokyo-1.aaaaaaaaold3"
	sh.run(t, "docs/operations.md", "pause", "NAME", "old-port-alias")
	paused := backendsOf(t, emu, aliasLB, "alias")
	addNode(t, c, "node-joined", "10.0.0.99")
	eventually.Passes(t, time.Minute, 250*time.Millisecond, func() error {
		if got := backendsOf(t, emu, "ocid1.networkloadbalancer.oc1.ap-tokyo-1.aaaaaaaaold2", "fixed"); !slices.Contains(got, "10.0.0.99:30443") {
			return fmt.Errorf("old2's fixed has %q, without the node joined", got)
		}
		return nil
	})
	if got := backendsOf(t, emu, aliasLB, "alias"); !slices.Equal(got, paused) {
		t.Errorf("paused, old3's alias went from %q to %q", paused, got)
	}
	sh.run(t, "docs/operations.md", "resume", "NAME", "old-port-alias")
	if got := backendsOf(t, emu, aliasLB, "alias"); !slices.ContainsFunc(got, func(b string) bool { return strings.HasPrefix(b, "10.0.0.99:") }) {
		t.Errorf("resumed and Ready, old3's alias has %q, without the node joined while paused", got)
	}

	// old-single-service registers in old1's ingress; the block returns
	// once it is gone, its backends drained and removed.
	const lb = "ocid1.loadbalancer.oc1.ap-tokyo-1.aaaaaaaaold1"
	before := backendsOf(t, emu, lb, "ingress")
	preview := sh.run(t, "docs/operations.md", "delete-on-purpose", "NAME", "old-single-service",
		"--delete", "--delete --oci-loadbalancer-endpoint="+emu.URL())
	var removed []string
	for _, m := range regexp.MustCompile(`(?m)^\s+- (\S+) weight \d+$`).FindAllStringSubmatch(preview, -1) {
		removed = append(removed, m[1])
	}
	if len(removed) == 0 {
		t.Fatalf("plan --delete names no backend to drain and remove")
	}
	if diff := cmp.Diff(slices.DeleteFunc(before, func(b string) bool { return slices.Contains(removed, b) }), backendsOf(t, emu, lb, "ingress"), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("old1's ingress after deleting old-single-service differs from what plan --delete said (-said +now):\n%s", diff)
	}

	asUninstalled := emu.State()
	sh.run(t, "docs/operations.md", "uninstall-helm")
	if diff := cmp.Diff(asUninstalled, emu.State()); diff != "" {
		t.Errorf("helm uninstall changed OCI (-before +after):\n%s", diff)
	}
	if out, _ := kubectl(t, c, "", "get", "lbregistrars", "-o", "name"); strings.Count(out, "\n") != 3 {
		t.Errorf("after helm uninstall the cluster has %q, want the 3 resources not deleted on purpose", out)
	}
}
