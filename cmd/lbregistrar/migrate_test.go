package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/api/validation"
)

// Seed 000's two resources on one load balancer become one resource with
// both targets, which names them as replaced and passes validation.
func TestMigrateSeedTwoResources(t *testing.T) {
	out, stderr, err := run(t, newMigrateCommand(), "", "-f", filepath.Join(repo, "config", "samples", "v1alpha1_two_resources_one_lb.yaml"))
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	golden, err := os.ReadFile(testdata("two-resources-one-lb.migrated.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if out != string(golden) {
		t.Errorf("output differs from %s:\n%s", testdata("two-resources-one-lb.migrated.yaml"), out)
	}
	if !strings.Contains(out, validation.ReplacesAnnotation+": lbregistrar-ingress-http,lbregistrar-ingress-https") {
		t.Errorf("no replaces annotation:\n%s", out)
	}
	report, _, err := run(t, newValidateCommand(), out, "-f", "-")
	if err != nil || !strings.Contains(report, "LBRegistrar lbregistrar-ingress (nodes.peppy-ratio.dev/v1beta1): valid") {
		t.Errorf("merged resource does not validate: %v\n%s", err, report)
	}
}

func TestMigrateMergesAList(t *testing.T) {
	out, _, err := run(t, newMigrateCommand(), "", "-f", testdata("list.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"name: listed\n", validation.ReplacesAnnotation + ": listed-a,listed-b", "backendSetName: a", "backendSetName: b"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestMigrateKeepsTheNameOfALoneResource(t *testing.T) {
	out, _, err := run(t, newMigrateCommand(), "", "-f", filepath.Join(repo, "config", "samples", "v1alpha1_single_service.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "name: lbregistrar-ingress-https\n") || strings.Contains(out, validation.ReplacesAnnotation) {
		t.Errorf("output:\n%s", out)
	}
}

// Once the replaced resources are gone, migrating again prints the merged
// resource without the annotation naming them, for the hand-over is done.
func TestMigrateDropsTheReplacesAnnotationOfAMergedResource(t *testing.T) {
	out, _, err := run(t, newMigrateCommand(), "", "-f", testdata("two-resources-one-lb.migrated.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "name: lbregistrar-ingress\n") || strings.Contains(out, validation.ReplacesAnnotation) {
		t.Errorf("output:\n%s", out)
	}
}

// What cannot be merged is reported on stderr and printed nowhere.
func TestMigrateReportsWhatCannotBeMerged(t *testing.T) {
	for file, want := range map[string]string{
		"different-keys.yaml":       "team-a and team-b sign in to OCI differently (API key of user ocid1.user.oc1..aaaaaaaateama fingerprint 12:34:56:78:90:ab:cd:ef:12:34:56:78:90:ab:cd:ef, API key of user ocid1.user.oc1..aaaaaaaateamb",
		"different-identities.yaml": "team-a and team-b sign in to OCI differently (workload identity of service account team-a/lb-writer, workload identity of the controller's service account)",
		"conflicting-weights.yaml":  `light spec.services[0]: Duplicate value: "nodePort 30080": registers the same nodePort 30080 in backend set "web" as heavy spec.services[0], with weight 1 instead of 10`,
	} {
		t.Run(file, func(t *testing.T) {
			out, stderr, err := run(t, newMigrateCommand(), "", "-f", testdata(file))
			if err == nil || !strings.Contains(err.Error(), "1 load balancer(s) could not be merged") {
				t.Errorf("err = %v", err)
			}
			if out != "" {
				t.Errorf("printed:\n%s", out)
			}
			if !strings.Contains(stderr, "not merged: load balancer ocid1.loadbalancer.oc1.ap-tokyo-1.aaaaaaaaexample") || !strings.Contains(stderr, want) {
				t.Errorf("stderr lacks %q:\n%s", want, stderr)
			}
		})
	}
}

func TestMergedName(t *testing.T) {
	for _, tt := range []struct {
		names []string
		taken []string
		want  string
	}{
		{[]string{"app-http", "app-https"}, nil, "app"},
		{[]string{"app-a", "app-b", "app-c"}, nil, "app"},
		{[]string{"web", "api"}, nil, "web-merged"},
		{[]string{"app-a", "app-b"}, []string{"app"}, "app-a-merged"},
		{[]string{"a-x", "a-y"}, []string{"a", "a-x-merged"}, "a-x-merged-2"},
		{[]string{"ingress", "ingress-http"}, nil, "ingress-merged"},
	} {
		group := migrateGroup(tt.names...)
		taken := map[string]bool{}
		for _, n := range append(tt.taken, tt.names...) {
			taken[n] = true
		}
		if got := mergedName(group, taken); got != tt.want {
			t.Errorf("mergedName(%v, taken %v) = %q, want %q", tt.names, tt.taken, got, tt.want)
		}
	}
}

func migrateGroup(names ...string) []*v1beta1.LBRegistrar {
	group := make([]*v1beta1.LBRegistrar, 0, len(names))
	for _, n := range names {
		group = append(group, &v1beta1.LBRegistrar{ObjectMeta: metav1.ObjectMeta{Name: n}})
	}
	return group
}
