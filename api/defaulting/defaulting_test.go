package defaulting

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	kjson "sigs.k8s.io/json"
)

// The CRD's defaults fill what a manifest leaves out, at every level, and
// nothing it states.
func TestDefault(t *testing.T) {
	for name, tc := range map[string]struct{ version, in, want string }{
		"v1alpha1 weights left out": {"v1alpha1",
			`{"spec":{"service":{"name":"a"},"services":[{"name":"b"},{"name":"c","weight":5}]}}`,
			`{"spec":{"weight":1,"service":{"name":"a","weight":1},"services":[{"name":"b","weight":1},{"name":"c","weight":5}]}}`},
		"v1alpha1 weights stated": {"v1alpha1",
			`{"spec":{"weight":3,"service":{"name":"a","weight":0}}}`,
			`{"spec":{"weight":3,"service":{"name":"a","weight":0}}}`},
		"unknown fields kept for strict decoding to refuse": {"v1alpha1",
			`{"spec":{"weight":3,"nope":true}}`,
			`{"spec":{"weight":3,"nope":true}}`},
	} {
		t.Run(name, func(t *testing.T) {
			out, err := Default([]byte(tc.in), tc.version)
			if err != nil {
				t.Fatal(err)
			}
			var got, want any
			if err := kjson.UnmarshalCaseSensitivePreserveInts(out, &got); err != nil {
				t.Fatal(err)
			}
			if err := kjson.UnmarshalCaseSensitivePreserveInts([]byte(tc.want), &want); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	if _, err := Default([]byte(`{}`), "v9"); err == nil {
		t.Error("a version the CRD does not have was defaulted")
	}
}
