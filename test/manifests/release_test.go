package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/chart/v2/loader"
)

// A release is one number: the chart's version X.Y.Z, the image tag vX.Y.Z
// both the chart and every kustomize overlay install, and a section of
// CHANGELOG.md with its upgrade steps; no shipped manifest installs a
// moving tag such as latest (docs/releases.md).
func TestOneReleaseNumber(t *testing.T) {
	chart, err := loader.Load(filepath.Join(root, chartPath))
	if err != nil {
		t.Fatal(err)
	}
	version := chart.Metadata.Version
	if !regexp.MustCompile(`^\d+\.\d+\.\d+$`).MatchString(version) {
		t.Fatalf("chart version %q is not X.Y.Z", version)
	}
	tag := "v" + version
	if chart.Metadata.AppVersion != tag {
		t.Errorf("chart appVersion %q, want %q", chart.Metadata.AppVersion, tag)
	}
	for _, overlay := range []string{"default", "with-cert-manager", "plan-job"} {
		for _, obj := range kustomize(t, overlay) {
			if obj["kind"] != "Deployment" && obj["kind"] != "Job" {
				continue
			}
			image, _ := field(obj, "spec.template.spec.containers.0.image").(string)
			if !strings.HasSuffix(image, ":"+tag) {
				t.Errorf("config/%s installs image %q, want tag %s", overlay, image, tag)
			}
		}
	}
	for _, file := range []string{"config/manager/deployment.yaml", "config/plan-job/job.yaml"} {
		base, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(base), "image: lbregistrar:"+tag+"\n") {
			t.Errorf("%s does not name image lbregistrar:%s", file, tag)
		}
	}
	for _, obj := range render(t, "") {
		if image, ok := field(obj, "spec.template.spec.containers.0.image").(string); ok && !strings.HasSuffix(image, ":"+tag) {
			t.Errorf("the chart installs image %q, want tag %s", image, tag)
		}
	}
	changelog, err := os.ReadFile(filepath.Join(root, "CHANGELOG.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(changelog), "\n## "+tag) {
		t.Errorf("CHANGELOG.md has no section %q", "## "+tag)
	}
}
