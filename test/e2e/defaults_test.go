package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/peppy-ratio/lbregistrar/test/kube"
)

// lbregistrar convert gives what the cluster stores: for every sample and
// for manifests that leave out what the CRD defaults (v1alpha1's weight at
// every level, as the original operator's CRD had it), the v1beta1 spec the
// CLI prints from the file is the one the real API server stores and
// returns for the same file.
func TestConvertGivesWhatTheAPIServerStores(t *testing.T) {
	t.Parallel()
	c := kube.Start(t, kube.Options{})
	paths, err := filepath.Glob(filepath.Join(c.Root, "config", "samples", "*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no samples: %v", err)
	}
	manifests := map[string]string{}
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range strings.Split(string(data), "\n---\n") {
			var head struct{ Kind string }
			if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
				t.Fatalf("%s#%d: %v", path, i, err)
			}
			if head.Kind == "LBRegistrar" { // a sample may bring what it names, a ServiceAccount
				manifests[fmt.Sprintf("%s#%d", filepath.Base(path), i)] = doc
			}
		}
	}
	for name, spec := range withoutDefaults() {
		manifests[name] = "apiVersion: nodes.peppy-ratio.dev/v1alpha1\nkind: LBRegistrar\nmetadata:\n  name: defaults\nspec:\n" + spec + apiKeySpec
	}

	for name, manifest := range manifests {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "manifest.yaml")
			if err := os.WriteFile(file, []byte(manifest), 0o600); err != nil {
				t.Fatal(err)
			}
			out, err := exec.CommandContext(testContext(t), lbregistrar(t), "convert", "-f", file, "--to", "v1beta1").Output()
			if err != nil {
				t.Fatalf("convert: %v", err)
			}
			var converted struct {
				Metadata struct{ Name string }
				Spec     map[string]any
			}
			if err := yaml.Unmarshal(out, &converted); err != nil {
				t.Fatal(err)
			}

			kubectl(t, c, manifest, "create", "-f", "-")
			stored, _ := kubectl(t, c, "", "get", "lbregistrars.v1beta1.nodes.peppy-ratio.dev", converted.Metadata.Name, "-o", "jsonpath={.spec}")
			kubectl(t, c, "", "delete", "lbregistrar", converted.Metadata.Name)
			var want map[string]any
			if err := yaml.Unmarshal([]byte(stored), &want); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, converted.Spec); diff != "" {
				t.Errorf("the API server stores (-), convert prints (+):\n%s\n%s", diff, manifest)
			}
		})
	}
}

// withoutDefaults are v1alpha1 specs, by name, that leave out what the CRD
// defaults, each alone and together.
func withoutDefaults() map[string]string {
	const lb = "  loadBalancerId: ocid1.loadbalancer.oc1.ap-tokyo-1.aaaaaaaadefaults\n"
	service := func(weight string) string {
		return "  service:\n    name: ingress\n    namespace: default\n    port: 443\n" + weight
	}
	item := func(set, weight string) string {
		return "  - name: ingress\n    namespace: default\n    port: 443\n    backendSetName: " + set + "\n" + weight
	}
	specs := map[string]string{}
	for _, top := range []string{"", "  weight: 3\n"} {
		for _, inner := range []string{"", "    weight: 5\n"} {
			name := fmt.Sprintf("top %q inner %q", strings.TrimSpace(top), strings.TrimSpace(inner))
			specs["service "+name] = lb + "  backendSetName: ingress\n" + top + service(inner)
			specs["services "+name] = lb + top + "  services:\n" + item("a", inner) + item("b", "")
		}
		specs["nodePort, top "+strings.TrimSpace(top)] = lb + "  backendSetName: ingress\n  nodePort: 30443\n" + top
	}
	return specs
}
