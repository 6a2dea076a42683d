package validation

import (
	"os"
	"path/filepath"
	"testing"

	apix "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// The CRD schema caps spec.services with the same number as MaxTargets in
// every version, so that clients which skip the webhook meet the same limit.
func TestSchemaCapsTargetsLikeValidation(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "config", "crd", "bases", "nodes.peppy-ratio.dev_lbregistrars.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var crd apix.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(raw, &crd); err != nil {
		t.Fatal(err)
	}
	if len(crd.Spec.Versions) == 0 {
		t.Fatal("the CRD has no versions")
	}
	for _, v := range crd.Spec.Versions {
		services := v.Schema.OpenAPIV3Schema.Properties["spec"].Properties["services"]
		if services.MaxItems == nil || *services.MaxItems != MaxTargets {
			t.Errorf("%s: spec.services maxItems = %v, want %d", v.Name, services.MaxItems, MaxTargets)
		}
	}
}
