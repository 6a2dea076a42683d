package e2e

import (
	"strings"
	"testing"
)

// kubectl apply of a v1alpha1 object with three distinct mistakes is refused,
// and kubectl shows all three, each by its field path as written.
func TestApplyShowsEveryMistake(t *testing.T) {
	t.Parallel()
	c := shared(t)
	manifest := strings.NewReplacer(
		"name: lbregistrar-ingress-https", "name: three-mistakes",
		"region: ap-tokyo-1", "region: Tokyo",
		`fingerprint: "12:34:56:78:90:ab:cd:ef:12:34:56:78:90:ab:cd:ef"`, `fingerprint: "12:34"`,
		"backendSetName: ingress", "backendSetName: ingress set!",
	).Replace(testdata(t, "seed000-single-service.yaml"))

	_, stderr, err := c.Kubectl(testContext(t), manifest, "apply", "-f", "-")
	if err == nil {
		t.Fatal("an object with three mistakes was accepted")
	}
	t.Logf("kubectl apply:\n%s", stderr)
	for _, path := range []string{"spec.apiKey.region", "spec.apiKey.fingerprint", "spec.backendSetName"} {
		if !strings.Contains(stderr, path) {
			t.Errorf("kubectl does not show %s:\n%s", path, stderr)
		}
	}
}

// A second resource claiming a (load balancer, backend set) pair that another
// one already has is refused, naming the first.
func TestSecondClaimIsRefused(t *testing.T) {
	t.Parallel()
	c := shared(t)
	first := strings.NewReplacer(
		"name: lbregistrar-ingress-https", "name: claim-first",
		"aaaaaaaaexample\n  backendSetName", "aaaaaaaaclaimed\n  backendSetName",
	).Replace(testdata(t, "seed000-single-service.yaml"))
	if !strings.Contains(first, "aaaaaaaaclaimed") {
		t.Fatal("the test manifest did not get its own load balancer")
	}
	kubectl(t, c, first, "apply", "-f", "-")

	second := strings.Replace(first, "name: claim-first", "name: claim-second", 1)
	_, stderr, err := c.Kubectl(testContext(t), second, "apply", "-f", "-")
	if err == nil {
		t.Fatal("a second claim on the same load balancer and backend set was accepted")
	}
	if !strings.Contains(stderr, "claim-first") {
		t.Errorf("the refusal does not name the first resource:\n%s", stderr)
	}
}
