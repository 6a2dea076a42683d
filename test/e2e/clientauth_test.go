package e2e

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/peppy-ratio/lbregistrar/test/kube"
)

// With --webhook-client-ca-file, only the API server, which presents the
// client certificate its AdmissionConfiguration names, is admitted to the
// admission webhooks: it admits and refuses through them as ever, and
// converts (the conversion webhook stays open: the API server has no
// client certificate for it), while any other caller posting an
// AdmissionReview is answered 403 and learns nothing.
func TestOnlyTheAPIServerIsAdmitted(t *testing.T) {
	apiServer, err := kube.NewClientCertificate("kube-apiserver")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	file := func(name string, data []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	caFile := file("client-ca.crt", apiServer.CAPEM)
	// The user named "*" is used for every webhook; a cluster names the
	// webhook's service, lbregistrar-webhook.lbregistrar-system.svc.
	kubeconfig := file("webhook-kubeconfig.yaml", []byte(`apiVersion: v1
kind: Config
users:
- name: "*"
  user:
    client-certificate: `+file("client.crt", apiServer.CertPEM)+`
    client-key: `+file("client.key", apiServer.KeyPEM)+`
`))
	admissionConfig := file("admission.yaml", []byte(`apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: ValidatingAdmissionWebhook
  configuration:
    apiVersion: apiserver.config.k8s.io/v1
    kind: WebhookAdmissionConfiguration
    kubeConfigFile: `+kubeconfig+`
`))
	c := kube.Start(t, kube.Options{Bare: true, APIServerFlags: map[string]string{"admission-control-config-file": admissionConfig}})
	emu := seededEmulator(t, c.Root+"/cmd/localrun/seed.yaml", 0)
	kubectl(t, c, "", "create", "namespace", kube.Namespace)
	createWorkload(t, c)
	serve := serveAdmitting(t, c, emu, "--webhook-client-ca-file="+caFile)

	kubectl(t, c, apiKeyFor(t, c, emu, classicIngressRegistrar), "apply", "-f", "-")
	kubectl(t, c, "", "get", "lbregistrars.v1beta1.nodes.peppy-ratio.dev", "legit")
	_, stderr, err := c.Kubectl(testContext(t), strings.Replace(classicIngressRegistrar, "nodePort: 30443", "nodePort: 99999", 1), "apply", "-f", "-")
	if err == nil || !strings.Contains(stderr, "spec.nodePort") {
		t.Errorf("an invalid write through the API server: %v %s", err, stderr)
	}

	anyone := target{addr: serve.WebhookAddr, tls: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // the caller does not check who answers
	if err := anyone.expect(post("/validate-nodes-peppy-ratio-dev-v1alpha1-lbregistrar", admissionReview(seedJSON(t)), ""), 403); err != nil {
		t.Errorf("an AdmissionReview from a caller without the certificate: %v", err)
	}
	if err := anyone.expectBody(post("/convert", reviewToBeta(string(seedJSON(t))), ""), 200, `"status":"Success"`); err != nil {
		t.Errorf("a ConversionReview from a caller without the certificate: %v", err)
	}
}
