package e2e

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	cmclient "github.com/cert-manager/cert-manager/pkg/client/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/peppy-ratio/lbregistrar/certs"
	"github.com/peppy-ratio/lbregistrar/test/eventually"
	"github.com/peppy-ratio/lbregistrar/test/kube"
)

// The cert-manager mode, with cert-manager's CRDs and the project's
// cert-manager objects on a real API server, and the lbregistrar binary
// serving: it stays unready until the Certificate is Ready, then serves the
// key pair from a Secret shaped like the one cert-manager writes. What
// cert-manager and its cainjector would do is done here by hand.
func TestCertManagerMode(t *testing.T) {
	t.Parallel()
	c := kube.Start(t, kube.Options{Bare: true})
	ctx := testContext(t)

	if err := c.InstallCertManagerCRDs(ctx); err != nil {
		t.Fatal(err)
	}
	kubectl(t, c, "", "create", "namespace", kube.Namespace)
	out, _ := kubectl(t, c, "", "apply", "-k", c.Root+"/config/certmanager")
	t.Logf("config/certmanager:\n%s", out)

	ca, err := certs.NewCA("lbregistrar-ca", time.Now(), 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	serve := newServeProcess()
	// cainjector's part: the CA into the webhook configuration and the CRD.
	serve.startInstalled(t, c, c.Kubeconfig, ca.CertPEM, "--cert-mode=cert-manager")

	// Up but not ready while the Certificate is not Ready. That it does not
	// become ready cannot be waited for; instead readiness is checked after
	// each of the process's first two reads of the Certificate (at start and
	// at its first retry) found it not Ready, which bounds the check by what
	// the process did rather than by a time, and shows the refusal lasting.
	eventually.Passes(t, 30*time.Second, 100*time.Millisecond, func() error {
		if serve.Readyz() == 0 {
			return errors.New("the health endpoint does not answer")
		}
		return nil
	})
	for refusals := 1; refusals <= 2; refusals++ {
		serve.waitLogged(t, refusals, "certificate "+kube.Namespace+"/lbregistrar-webhook is not Ready")
		if serve.Readyz() == http.StatusOK {
			t.Fatalf("ready after the process found the Certificate not Ready %d times", refusals)
		}
	}

	// cert-manager's part: the Secret, then the Ready condition.
	issueAsCertManager(t, c, ca)

	serve.waitReady(t)

	manifest := strings.Replace(testdata(t, "seed000-single-service.yaml"), "name: lbregistrar-ingress-https", "name: cert-manager-mode", 1)
	kubectl(t, c, manifest, "apply", "-f", "-")
	out, _ = kubectl(t, c, "", "get", "lbregistrars.v1beta1.nodes.peppy-ratio.dev", "cert-manager-mode", "-o", "jsonpath={.spec.services[0].backendSetName}")
	if out != "ingress" {
		t.Errorf("read as v1beta1 through the binary's conversion webhook: backendSetName %q", out)
	}

	serve.assertMetrics(t,
		`lbregistrar_webhook_requests_total{code="200",path="/convert"}`,
		`lbregistrar_webhook_requests_total{code="200",path="/validate-nodes-peppy-ratio-dev-v1alpha1-lbregistrar"}`)
}

// issueAsCertManager does what cert-manager would for config/certmanager's
// Certificate: a serving key pair for 127.0.0.1 signed by ca in the
// Certificate's Secret, shaped as cert-manager writes it, then the Ready
// condition.
func issueAsCertManager(t *testing.T, c *kube.Cluster, ca *certs.CA) {
	t.Helper()
	ctx := testContext(t)
	pair, err := ca.IssueServing([]string{"127.0.0.1"}, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: kube.Namespace, Name: kube.CertSecret, Annotations: map[string]string{
			"cert-manager.io/certificate-name": "lbregistrar-webhook",
			"cert-manager.io/issuer-name":      "lbregistrar-ca",
			"cert-manager.io/issuer-kind":      "Issuer",
			"cert-manager.io/issuer-group":     "cert-manager.io",
			"cert-manager.io/ip-sans":          "127.0.0.1",
		}},
		Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: pair.CertPEM, corev1.TLSPrivateKeyKey: pair.KeyPEM, "ca.crt": ca.CertPEM},
	}
	if err := c.Client.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	cm, err := cmclient.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	crt, err := cm.CertmanagerV1().Certificates(kube.Namespace).Get(ctx, "lbregistrar-webhook", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	crt.Status.Conditions = []cmapi.CertificateCondition{{
		Type: cmapi.CertificateConditionReady, Status: cmmeta.ConditionTrue, Reason: "Ready",
		Message: "Certificate is up to date and has not expired", ObservedGeneration: crt.Generation, LastTransitionTime: &now,
	}}
	crt.Status.NotAfter = &metav1.Time{Time: now.Add(time.Hour)}
	if _, err := cm.CertmanagerV1().Certificates(kube.Namespace).UpdateStatus(ctx, crt, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}
