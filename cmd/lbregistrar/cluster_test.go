package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/peppy-ratio/lbregistrar/test/kube"
)

// Against a real API server with the webhooks installed: kubectl apply of a
// bad resource fails at once with every cause, validate --kubeconfig finds
// claims made in the cluster and checks edits as updates, and migrate
// --kubeconfig merges what the cluster has.
func TestAgainstACluster(t *testing.T) {
	c := kube.Start(t, kube.Options{})
	ctx := context.Background()

	// The schema rejects some mistakes before admission runs; these ones
	// only the webhook sees, and it reports all of them in one answer.
	_, stderr, err := c.Kubectl(ctx, "", "apply", "-f", testdata("webhook-mistakes.yaml"))
	if err == nil {
		t.Fatal("kubectl apply accepted a resource with eight mistakes")
	}
	for _, field := range []string{"spec.loadBalancerId", "spec.apiKey.user", "spec.apiKey.fingerprint",
		"spec.services[0].port", "spec.services[0].backendSetName", "spec.services[1].port", "spec.services[1].backendSetName", "spec.services[1]: Duplicate"} {
		if !strings.Contains(stderr, field) {
			t.Errorf("kubectl apply error does not name %s:\n%s", field, stderr)
		}
	}

	seed := filepath.Join(repo, "config", "samples", "v1alpha1_two_resources_one_lb.yaml")
	out, stderr, err := c.Kubectl(ctx, "", "apply", "-f", seed)
	if err != nil {
		t.Fatalf("applying seed 000's two resources: %v\n%s", err, stderr)
	}
	if !strings.Contains(stderr, "spec.service is deprecated: use spec.services") {
		t.Errorf("kubectl apply printed no deprecation warning:\n%s%s", out, stderr)
	}

	// A new resource claiming one of their backend sets, and an edit that
	// moves one of them to another load balancer.
	first := strings.SplitN(mustRead(t, seed), "\n---\n", 2)[0]
	claiming := strings.Replace(first, "name: lbregistrar-ingress-https", "name: claimer", 1)
	moved := strings.Replace(first, "ocid1.networkloadbalancer.oc1.ap-tokyo-1.amaaaaaaw3qjxjtp6pcc5a2sf6vwhrr7eoxqvsmbm3tcfpgpqbexample",
		"ocid1.networkloadbalancer.oc1.ap-tokyo-1.amaaaaaaother", 1)
	claimer := filepath.Join(t.TempDir(), "claimer.yaml")
	if err := os.WriteFile(claimer, []byte(claiming+"\n---\n"+moved), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, err = run(t, newValidateCommand(), "", "-f", claimer, "--kubeconfig", c.Kubeconfig)
	if !errors.Is(err, errInvalid) {
		t.Fatalf("err = %v\n%s", err, out)
	}
	for _, want := range []string{
		`error: spec.backendSetName: Duplicate value: "ingress": backend set "ingress" of load balancer ocid1.networkloadbalancer.oc1.ap-tokyo-1.amaaaaaaw3qjxjtp6pcc5a2sf6vwhrr7eoxqvsmbm3tcfpgpqbexample is already claimed by LBRegistrar "lbregistrar-ingress-https"`,
		`error: spec.loadBalancerId: Invalid value: "ocid1.networkloadbalancer.oc1.ap-tokyo-1.amaaaaaaother": field is immutable`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("validate output lacks %q:\n%s", want, out)
		}
	}
	// Offline, the same file has no cross-resource problem to find.
	if out, _, err := run(t, newValidateCommand(), "", "-f", claimer); err != nil {
		t.Errorf("offline: %v\n%s", err, out)
	}

	merged, stderr, err := run(t, newMigrateCommand(), "", "--kubeconfig", c.Kubeconfig)
	if err != nil {
		t.Fatalf("migrate: %v\n%s", err, stderr)
	}
	if merged != mustRead(t, testdata("two-resources-one-lb.migrated.yaml")) {
		t.Errorf("migrate from the cluster:\n%s", merged)
	}
	// The merged resource replaces both, so it is admitted beside them.
	if _, stderr, err := c.Kubectl(ctx, merged, "apply", "-f", "-"); err != nil {
		t.Errorf("applying the merged resource: %v\n%s", err, stderr)
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
