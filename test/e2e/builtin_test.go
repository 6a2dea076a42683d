package e2e

import (
	"bytes"
	"testing"

	"github.com/peppy-ratio/lbregistrar/test/kube"
)

// The lbregistrar binary in the built-in mode, given webhook configurations
// and a CRD with no CA bundle: it creates the certificate Secret, publishes
// the bundle into both, becomes ready, and serves kubectl apply.
func TestBuiltinModeBinary(t *testing.T) {
	t.Parallel()
	c := kube.Start(t, kube.Options{Bare: true})
	ctx := testContext(t)
	kubectl(t, c, "", "create", "namespace", kube.Namespace)

	serve := newServeProcess()
	serve.startInstalled(t, c, c.Kubeconfig, nil, "--cert-mode=builtin", "--webhook-host=127.0.0.1")
	serve.waitReady(t)

	bundle := secretData(t, c)["ca.crt"]
	if len(bundle) == 0 {
		t.Fatal("no CA bundle in the certificate Secret")
	}
	bundles, err := c.CABundles(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i, b := range bundles {
		if !bytes.Equal(b, bundle) {
			t.Errorf("CA bundle %d (0 is the CRD's) is not the Secret's", i)
		}
	}

	kubectl(t, c, testdata(t, "seed000-single-service.yaml"), "apply", "-f", "-")
	out, _ := kubectl(t, c, "", "get", "lbregistrars.v1beta1.nodes.peppy-ratio.dev", "lbregistrar-ingress-https", "-o", "jsonpath={.spec.services[0].backendSetName}")
	if out != "ingress" {
		t.Errorf("read as v1beta1 through the binary's conversion webhook: backendSetName %q", out)
	}
}
