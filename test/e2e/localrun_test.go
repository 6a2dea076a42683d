package e2e

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/peppy-ratio/lbregistrar/test/kube"
)

// TestLocalRun runs make run's program to the point where every sample is
// registered in the emulated load balancers and a request has gone through
// one of them to a registered node address, then lets it stop.
func TestLocalRun(t *testing.T) {
	t.Parallel()
	root, err := kube.FindRoot()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "run", "./cmd/localrun", "-check", "-timeout", "4m", "-lbregistrar", lbregistrar(t))
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("localrun: %v\n%s", err, out)
	}
	for _, want := range []string{
		"Warning: nodes.peppy-ratio.dev/v1alpha1 LBRegistrar is deprecated",
		"lbregistrar-ingress-https   True",
		"edge-fixed-port             True",
		"-> served by node-",
		`GET /debug/lanes: {"time":`,
		`"leader":true`,
		`lbregistrar_backends_registered{backend_set="ingress",lbregistrar="lbregistrar-ingress-https"} 2`,
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
