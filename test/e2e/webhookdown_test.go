package e2e

import (
	"strings"
	"testing"

	"github.com/peppy-ratio/lbregistrar/test/kube"
)

// With no webhook server answering, failurePolicy Fail (config/webhook)
// refuses what only the webhook could judge, and the CRD's own schema and
// CEL rules still reject what they cover, with their own message.
func TestWebhookDown(t *testing.T) {
	t.Parallel()
	c := kube.Start(t, kube.Options{})
	if err := c.Webhooks.Stop(); err != nil {
		t.Fatal(err)
	}
	ctx := testContext(t)

	// Only the webhook checks the fingerprint's format.
	badFingerprint := betaManifest("down-fingerprint", "ocid1.loadbalancer.oc1.ap-tokyo-1.aaaaaaaadown1", "not-a-fingerprint")
	_, stderr, err := c.Kubectl(ctx, badFingerprint, "apply", "-f", "-")
	if err == nil || !strings.Contains(stderr, `failed calling webhook "v1beta1.lbregistrars.nodes.peppy-ratio.dev"`) {
		t.Errorf("want the apply refused because the webhook cannot be called; err=%v stderr:\n%s", err, stderr)
	}

	// The CRD's CEL rule on loadBalancerId needs no webhook.
	badOCID := betaManifest("down-ocid", "not-an-ocid", "12:34:56:78:90:ab:cd:ef:12:34:56:78:90:ab:cd:ef")
	_, stderr, err = c.Kubectl(ctx, badOCID, "apply", "-f", "-")
	if err == nil || !strings.Contains(stderr, "spec.loadBalancerId: Invalid value") || !strings.Contains(stderr, "must be the OCID of a load balancer or network load balancer") {
		t.Errorf("want the CEL rule's rejection; err=%v stderr:\n%s", err, stderr)
	}

	// So does the one that asks for exactly one identity.
	fp := "12:34:56:78:90:ab:cd:ef:12:34:56:78:90:ab:cd:ef"
	twoIdentities := betaManifest("down-identities", "ocid1.loadbalancer.oc1.ap-tokyo-1.aaaaaaaadown2", fp) + "  instancePrincipal:\n    region: ap-tokyo-1\n"
	noIdentity := betaManifest("down-identity", "ocid1.loadbalancer.oc1.ap-tokyo-1.aaaaaaaadown3", fp)
	noIdentity = noIdentity[:strings.Index(noIdentity, "  apiKey:")]
	for _, manifest := range []string{twoIdentities, noIdentity} {
		_, stderr, err = c.Kubectl(ctx, manifest, "apply", "-f", "-")
		if err == nil || !strings.Contains(stderr, "set exactly one of apiKey, workloadIdentity and instancePrincipal") {
			t.Errorf("want the CEL rule's rejection; err=%v stderr:\n%s", err, stderr)
		}
	}
}

// The CRD's enum and CEL rules on targetType need no webhook either.
func TestWebhookDownTargetType(t *testing.T) {
	t.Parallel()
	c := kube.Start(t, kube.Options{})
	if err := c.Webhooks.Stop(); err != nil {
		t.Fatal(err)
	}
	ctx := testContext(t)
	fp := "12:34:56:78:90:ab:cd:ef:12:34:56:78:90:ab:cd:ef"
	target := "    backendSetName: ingress\n"
	for _, tt := range []struct{ name, fields, want string }{
		{"down-type", "    targetType: Instance\n", `Unsupported value: "Instance"`},
		{"down-pod-filter", "    targetType: Pod\n    filterByEndpoints: true\n", "filterByEndpoints chooses nodes; targetType Pod registers the endpoints themselves"},
	} {
		manifest := strings.Replace(betaManifest(tt.name, "ocid1.loadbalancer.oc1.ap-tokyo-1.aaaaaaaa"+strings.ReplaceAll(tt.name, "-", ""), fp), target, target+tt.fields, 1)
		_, stderr, err := c.Kubectl(ctx, manifest, "apply", "-f", "-")
		if err == nil || !strings.Contains(stderr, tt.want) {
			t.Errorf("%s: want the schema's rejection %q; err=%v stderr:\n%s", tt.name, tt.want, err, stderr)
		}
	}
}

func betaManifest(name, loadBalancerID, fingerprint string) string {
	return `apiVersion: nodes.peppy-ratio.dev/v1beta1
kind: LBRegistrar
metadata:
  name: ` + name + `
spec:
  loadBalancerId: ` + loadBalancerID + `
  services:
  - name: istio-ingressgateway
    namespace: istio-system
    port: https
    backendSetName: ingress
    weight: 1
  apiKey:
    user: ocid1.user.oc1..aaaaaaaaexample
    fingerprint: "` + fingerprint + `"
    tenancy: ocid1.tenancy.oc1..aaaaaaaaexample
    region: ap-tokyo-1
    privateKey:
      namespace: lbregistrar-system
      secretKeyRef:
        name: oci-api-key
        key: private-key
`
}
