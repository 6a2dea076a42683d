package main

import (
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/yaml"

	"github.com/peppy-ratio/lbregistrar/api/v1alpha1"
	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
)

func TestConvertSingleServiceToV1beta1(t *testing.T) {
	out, _, err := run(t, newConvertCommand(), "", "-f", filepath.Join(repo, "config", "samples", "v1alpha1_single_service.yaml"), "--to", "v1beta1")
	if err != nil {
		t.Fatal(err)
	}
	var got v1beta1.LBRegistrar
	if err := yaml.UnmarshalStrict([]byte(out), &got); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if got.APIVersion != "nodes.peppy-ratio.dev/v1beta1" || got.Name != "lbregistrar-ingress-https" || len(got.Annotations) != 0 {
		t.Errorf("metadata: %+v %+v", got.TypeMeta, got.ObjectMeta)
	}
	want := []v1beta1.Target{{Name: "istio-ingressgateway", Namespace: "istio-system", Port: got.Spec.Services[0].Port, BackendSetName: "ingress", Weight: 1}}
	if got.Spec.Services[0].Port.String() != "https" || !equality.Semantic.DeepEqual(got.Spec.Services, want) {
		t.Errorf("services = %+v", got.Spec.Services)
	}
	for _, absent := range []string{"creationTimestamp", "status"} {
		if strings.Contains(out, absent) {
			t.Errorf("output contains %s:\n%s", absent, out)
		}
	}
}

// Converting to v1beta1 and back with --lossless gives the files as written.
func TestConvertLosslessRoundTrip(t *testing.T) {
	input := filepath.Join(repo, "config", "samples", "v1alpha1_two_resources_one_lb.yaml")
	hubYAML, _, err := run(t, newConvertCommand(), "", "-f", input, "--to", "v1beta1", "--lossless")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(hubYAML, v1alpha1.AlphaSpecAnnotation) || strings.Count(hubYAML, "\n---\n") != 1 {
		t.Fatalf("v1beta1 output:\n%s", hubYAML)
	}
	alphaYAML, _, err := run(t, newConvertCommand(), hubYAML, "-f", "-", "--to", "v1alpha1")
	if err != nil {
		t.Fatal(err)
	}
	back, err := readManifests([]string{"-"}, strings.NewReader(alphaYAML))
	if err != nil || len(back.errs) != 0 {
		t.Fatal(err, back.errs)
	}
	orig, err := readManifests([]string{input}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range orig.manifests {
		want, got := orig.manifests[i].alpha, back.manifests[i].alpha
		if got == nil || !equality.Semantic.DeepEqual(want.Spec, got.Spec) || len(got.Annotations) != 0 {
			t.Errorf("object %d came back as\n%+v\nwant\n%+v", i, got, want)
		}
	}
}

func TestConvertV1beta1ToV1alpha1(t *testing.T) {
	out, _, err := run(t, newConvertCommand(), "", "-f", filepath.Join(repo, "config", "samples", "v1beta1_multi_service.yaml"), "--to", "v1alpha1")
	if err != nil {
		t.Fatal(err)
	}
	var got v1alpha1.LBRegistrar
	if err := yaml.UnmarshalStrict([]byte(out), &got); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(got.Spec.Services) != 2 || got.Spec.Services[1].BackendSetName != "ingress-http" {
		t.Errorf("spec = %+v", got.Spec)
	}
}

func TestConvertRefusesUnreadableInput(t *testing.T) {
	out, _, err := run(t, newConvertCommand(), "", "-f", testdata("malformed.yaml"), "--to", "v1beta1")
	if err == nil || !strings.Contains(err.Error(), "malformed.yaml:12:") || out != "" {
		t.Errorf("err = %v, output %q", err, out)
	}
	if _, _, err := run(t, newConvertCommand(), "", "-f", "-", "--to", "v2"); err == nil {
		t.Error("--to v2 accepted")
	}
}
