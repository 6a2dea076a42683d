package e2e

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/test/kube"
)

// With --webhook-client-ca-file, only the API server, which presents the
// client certificate its AdmissionConfiguration names, is admitted to the
// admission webhooks: it admits and refuses through them as ever, and
// converts (the conversion webhook stays open: the API server has no
// client certificate for it), and gives pods their readiness gate
// through the pod webhook, while any other caller posting an
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
- name: MutatingAdmissionWebhook
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

	kubectl(t, c, apiKeyFor(t, c, emu, classicIngressRegistrar+"---\n"+webPodsRegistrar), "apply", "-f", "-")
	kubectl(t, c, "", "get", "lbregistrars.v1beta1.nodes.peppy-ratio.dev", "legit")
	_, stderr, err := c.Kubectl(testContext(t), strings.Replace(classicIngressRegistrar, "nodePort: 30443", "nodePort: 99999", 1), "apply", "-f", "-")
	if err == nil || !strings.Contains(stderr, "spec.nodePort") {
		t.Errorf("an invalid write through the API server: %v %s", err, stderr)
	}

	// The readiness gates' pod webhook is reached with the certificate
	// too: a pod of a registered Service in a namespace that opted in
	// gets the gate.
	kubectl(t, c, "", "create", "namespace", "shop")
	kubectl(t, c, "", "label", "namespace", "shop", v1beta1.ReadinessGatesNamespaceLabel+"="+v1beta1.ReadinessGatesEnabled)
	kubectl(t, c, "", "create", "service", "clusterip", "web", "--namespace=shop", "--tcp=80:8080")
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-1", Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "web"}}}}
	if err := c.Client.Create(testContext(t), pod); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(pod.Spec.ReadinessGates, func(g corev1.PodReadinessGate) bool { return g.ConditionType == v1beta1.ReadinessGate }) {
		t.Errorf("a pod created through the API server got no readiness gate: %+v", pod.Spec.ReadinessGates)
	}

	anyone := target{addr: serve.WebhookAddr, tls: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // the caller does not check who answers
	if err := anyone.expect(post("/mutate-v1-pod", `{}`, ""), 403); err != nil {
		t.Errorf("a pod review from a caller without the certificate: %v", err)
	}
	if err := anyone.expect(post("/validate-nodes-peppy-ratio-dev-v1alpha1-lbregistrar", admissionReview(seedJSON(t)), ""), 403); err != nil {
		t.Errorf("an AdmissionReview from a caller without the certificate: %v", err)
	}
	if err := anyone.expectBody(post("/convert", reviewToBeta(string(seedJSON(t))), ""), 200, `"status":"Success"`); err != nil {
		t.Errorf("a ConversionReview from a caller without the certificate: %v", err)
	}
}
