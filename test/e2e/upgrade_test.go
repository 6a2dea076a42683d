package e2e

import (
	"os/exec"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peppy-ratio/lbregistrar/test/kube"
)

// A cluster running the original operator (its v1alpha1-only CRD, objects
// stored as v1alpha1) takes this project's CRD and webhooks: every object is
// still there in both versions, and migrate-storage leaves every one stored
// as v1beta1 with nothing lost.
func TestUpgradeFromTheOriginalOperator(t *testing.T) {
	t.Parallel()
	c := kube.Start(t, kube.Options{Bare: true})
	ctx := testContext(t)

	installOldOperatorCRD(t, c)
	kubectl(t, c, testdata(t, "old-operator-objects.yaml"), "apply", "-f", "-")
	kubectl(t, c, "", "patch", "lbregistrars.v1alpha1.nodes.peppy-ratio.dev", "old-single-service",
		"--subresource=status", "--type=merge", "-p", `{"status":{"phase":"READY"}}`)
	old := readAll(t, c, "v1alpha1")
	if len(old) != 4 {
		t.Fatalf("want 4 objects under the old CRD, got %d", len(old))
	}

	if err := c.InstallWebhooks(ctx, kube.WebhookOptions{}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(old, readAll(t, c, "v1alpha1")); diff != "" {
		t.Errorf("v1alpha1 objects after the upgrade (-before +after):\n%s", diff)
	}
	beta := readAll(t, c, "v1beta1")
	for name, obj := range beta {
		if services, _ := obj["spec"].(map[string]any)["services"].([]any); len(services) == 0 {
			t.Errorf("%s read as v1beta1 has no services: %v", name, obj["spec"])
		}
	}
	if got := storedVersions(t, c); !slices.Equal(got, []string{"v1alpha1", "v1beta1"}) {
		t.Errorf("storedVersions after the upgrade = %v", got)
	}

	if got, _ := storedObject(t, c, "old-node-port"); got != "nodes.peppy-ratio.dev/v1alpha1" {
		t.Fatalf("before the migration old-node-port is stored as %v", got)
	}

	out, err := exec.CommandContext(ctx, lbregistrar(t), "migrate-storage", "--kubeconfig", c.Kubeconfig).CombinedOutput()
	if err != nil {
		t.Fatalf("migrate-storage: %v\n%s", err, out)
	}
	t.Logf("migrate-storage: %s", out)
	if got := storedVersions(t, c); !slices.Equal(got, []string{"v1beta1"}) {
		t.Errorf("storedVersions after migrate-storage = %v", got)
	}

	for name, want := range beta {
		version, stored := storedObject(t, c, name)
		if version != "nodes.peppy-ratio.dev/v1beta1" {
			t.Errorf("%s is stored as %v after migrate-storage", name, version)
		}
		if diff := cmp.Diff(want, stored); diff != "" {
			t.Errorf("%s in etcd differs from what was served as v1beta1 before the migration (-served +stored):\n%s", name, diff)
		}
	}
}

// storedObject reads an LBRegistrar from etcd: its apiVersion and what
// readAll keeps.
func storedObject(t *testing.T, c *kube.Cluster, name string) (any, map[string]any) {
	t.Helper()
	data, err := c.Stored(testContext(t), "/registry/nodes.peppy-ratio.dev/lbregistrars/"+name)
	if err != nil {
		t.Fatal(err)
	}
	obj := object(t, string(data))
	meta := obj["metadata"].(map[string]any)
	return obj["apiVersion"], map[string]any{
		"annotations": meta["annotations"],
		"labels":      meta["labels"],
		"spec":        obj["spec"],
		"status":      obj["status"],
	}
}

// readAll lists every LBRegistrar in version through kubectl and keeps, per
// name, what a migration must not lose: annotations, labels, spec, status.
func readAll(t *testing.T, c *kube.Cluster, version string) map[string]map[string]any {
	t.Helper()
	out, _ := kubectl(t, c, "", "get", "lbregistrars."+version+".nodes.peppy-ratio.dev", "-o", "json")
	all := map[string]map[string]any{}
	for _, item := range object(t, out)["items"].([]any) {
		obj := item.(map[string]any)
		meta := obj["metadata"].(map[string]any)
		all[meta["name"].(string)] = map[string]any{
			"annotations": meta["annotations"],
			"labels":      meta["labels"],
			"spec":        obj["spec"],
			"status":      obj["status"],
		}
	}
	return all
}

func storedVersions(t *testing.T, c *kube.Cluster) []string {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.Client.Get(testContext(t), client.ObjectKey{Name: kube.CRDName}, crd); err != nil {
		t.Fatal(err)
	}
	return crd.Status.StoredVersions
}
