package api_test

import (
	"os"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// kubectl explain shows each field's description: every field of every
// version says what it is (metadata is Kubernetes' own and explained there).
func TestEveryFieldIsDocumented(t *testing.T) {
	data, err := os.ReadFile("../config/crd/bases/nodes.peppy-ratio.dev_lbregistrars.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(data, &crd); err != nil {
		t.Fatal(err)
	}
	var walk func(version, path string, s *apiextensionsv1.JSONSchemaProps)
	walk = func(version, path string, s *apiextensionsv1.JSONSchemaProps) {
		for name, prop := range s.Properties {
			field := path + "." + name
			if field == ".metadata" {
				continue
			}
			if prop.Description == "" {
				t.Errorf("%s: %s has no description for kubectl explain", version, field)
			}
			walk(version, field, &prop)
		}
		if s.Items != nil && s.Items.Schema != nil {
			walk(version, path+"[]", s.Items.Schema)
		}
	}
	for _, v := range crd.Spec.Versions {
		walk(v.Name, "", v.Schema.OpenAPIV3Schema)
	}
}
