package e2e

import (
	"slices"
	"strings"
	"testing"

	"github.com/peppy-ratio/lbregistrar/test/kube"
)

// kubectl explain describes every field of both versions.
func TestKubectlExplain(t *testing.T) {
	t.Parallel()
	c := shared(t)
	for version, fields := range map[string][]string{
		"v1beta1":  {"name", "namespace", "port", "nodePort", "filterByEndpoints", "backendSetName", "weight"},
		"v1alpha1": {"name", "namespace", "port", "filterByEndpoints", "backendSetName", "weight"},
	} {
		out, _ := kubectl(t, c, "", "explain", "lbregistrars.spec.services", "--api-version=nodes.peppy-ratio.dev/"+version)
		for _, f := range fields {
			// Each field is listed with its type and, under it, its description.
			i := strings.Index(out, "\n  "+f+"\t")
			if i < 0 {
				t.Errorf("%s: kubectl explain lists no field %s:\n%s", version, f, out)
				continue
			}
			rest := strings.SplitN(out[i+1:], "\n", 3)
			if len(rest) < 2 || strings.TrimSpace(rest[1]) == "" {
				t.Errorf("%s: kubectl explain shows no description for %s:\n%s", version, f, out)
			}
		}
	}
}

// kubectl wait answers the way it does for built-in kinds: on the Ready
// condition, and on status.observedGeneration reaching the generation.
func TestKubectlWait(t *testing.T) {
	t.Parallel()
	c := kube.Start(t, kube.Options{Bare: true})
	emu := seededEmulator(t, c.Root+"/cmd/localrun/seed.yaml", 0)
	kubectl(t, c, "", "create", "namespace", kube.Namespace)
	createWorkload(t, c)
	manifest := apiKeyFor(t, c, emu, classicIngressRegistrar)
	serve := newServeProcess()
	serve.startInstalled(t, c, c.Kubeconfig, nil, "--webhook-host=127.0.0.1", "--secret-namespaces="+kube.Namespace,
		"--oci-loadbalancer-endpoint="+emu.URL(), "--oci-networkloadbalancer-endpoint="+emu.URL(), "--oci-core-endpoint="+emu.URL())
	serve.waitReady(t)

	kubectl(t, c, manifest, "apply", "-f", "-")
	kubectl(t, c, "", "wait", "--for=condition=Ready", "lbr/legit", "--timeout=90s")
	generation, _ := kubectl(t, c, "", "get", "lbr", "legit", "-o", "jsonpath={.metadata.generation}")
	kubectl(t, c, "", "wait", "--for=jsonpath={.status.observedGeneration}="+generation, "lbr/legit", "--timeout=30s")
	registered := backendsOf(t, emu, classicIngress, "ingress")
	for _, want := range []string{"10.0.0.1:30443", "10.0.0.2:30443"} {
		if !strings.Contains(strings.Join(registered, " "), want) {
			t.Errorf("kubectl wait returned with %s not registered: %v", want, registered)
		}
	}
	// The nodes' addresses are outside loopback, which the emulator never
	// health-checks: OCI has no health data, so none of the two is OK.
	wide, _ := kubectl(t, c, "", "get", "lbr", "legit", "-o", "wide")
	if lines := strings.Split(strings.TrimSpace(wide), "\n"); len(lines) != 2 ||
		!slices.Contains(strings.Fields(lines[0]), "HEALTHY") || !slices.Contains(strings.Fields(lines[1]), "0/2") {
		t.Errorf("kubectl get lbr -o wide shows no Healthy column with 0/2:\n%s", wide)
	}
}
