// Package defaulting gives an LBRegistrar read from a file the defaults the
// API server would give it: those the CRD's schema declares (such as
// v1alpha1's weight: 1 at every level, as the original operator's CRD
// had), applied by the API server's own structural defaulting, from the
// generated CRD. The command-line tools convert and validate what the
// cluster would store, not what the file happens to leave out.
package defaulting

import (
	"encoding/json"
	"fmt"
	"sync"

	apiextensions "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/peppy-ratio/lbregistrar/config/crd"
)

// Default returns the JSON object raw, an LBRegistrar of version (v1alpha1
// or v1beta1), with the schema's defaults applied where raw leaves a field
// out, as the API server applies them on create and on read.
func Default(raw []byte, version string) ([]byte, error) {
	schemas, err := loadSchemas()
	if err != nil {
		return nil, err
	}
	schema, ok := schemas[version]
	if !ok {
		return nil, fmt.Errorf("the LBRegistrar CRD has no version %q", version)
	}
	var obj map[string]any
	if err := kjson.UnmarshalCaseSensitivePreserveInts(raw, &obj); err != nil {
		return nil, err
	}
	structuraldefaulting.Default(obj, schema)
	return json.Marshal(obj)
}

// loadSchemas reads the structural schema of each version of the CRD once.
var loadSchemas = sync.OnceValues(func() (map[string]*structuralschema.Structural, error) {
	var def apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(crd.LBRegistrars, &def); err != nil {
		return nil, fmt.Errorf("reading the LBRegistrar CRD: %w", err)
	}
	schemas := map[string]*structuralschema.Structural{}
	for _, v := range def.Spec.Versions {
		var props apiextensions.JSONSchemaProps
		if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v.Schema.OpenAPIV3Schema, &props, nil); err != nil {
			return nil, fmt.Errorf("the schema of %s: %w", v.Name, err)
		}
		s, err := structuralschema.NewStructural(&props)
		if err != nil {
			return nil, fmt.Errorf("the schema of %s: %w", v.Name, err)
		}
		schemas[v.Name] = s
	}
	return schemas, nil
})
