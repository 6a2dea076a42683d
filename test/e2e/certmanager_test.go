package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	cmclient "github.com/cert-manager/cert-manager/pkg/client/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/peppy-ratio/lbregistrar/certs"
	"github.com/peppy-ratio/lbregistrar/test/kube"
)

// The cert-manager mode, with cert-manager's CRDs and the project's
// cert-manager objects on a real API server, and the lbregistrar binary
// serving: it stays unready until the Certificate is Ready, then serves the
// key pair from a Secret shaped like the one cert-manager writes. What
// cert-manager and its cainjector would do is done here by hand.
func TestCertManagerMode(t *testing.T) {
	t.Parallel()
	binary := lbregistrar(t)
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
	webhookAddr, healthAddr, metricsAddr := freeAddr(t), freeAddr(t), freeAddr(t)
	url := "https://" + webhookAddr
	// cainjector's part: the CA into the webhook configuration and the CRD.
	if err := c.InstallValidatingWebhook(ctx, url, ca.CertPEM); err != nil {
		t.Fatal(err)
	}
	if err := c.InstallCRD(ctx, url, ca.CertPEM); err != nil {
		t.Fatal(err)
	}

	var logs bytes.Buffer
	serve := exec.Command(binary, "serve", "--cert-mode=cert-manager", "--kubeconfig", c.Kubeconfig,
		"--namespace", kube.Namespace, "--webhook-addr", webhookAddr, "--health-addr", healthAddr, "--metrics-addr", metricsAddr)
	serve.Stdout, serve.Stderr = &logs, &logs
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = serve.Process.Signal(os.Interrupt)
		_ = serve.Wait()
		if t.Failed() {
			t.Logf("lbregistrar serve:\n%s", logs.String())
		}
	})

	readyz := func() int {
		resp, err := http.Get("http://" + healthAddr + "/readyz")
		if err != nil {
			return 0
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	// Up but not ready while the Certificate is not Ready.
	answered := false
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		switch code := readyz(); code {
		case 0:
		case http.StatusOK:
			t.Fatal("ready before the Certificate is Ready")
		default:
			answered = true
		}
	}
	if !answered {
		t.Fatal("the health endpoint never answered")
	}

	// cert-manager's part: the Secret, then the Ready condition.
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

	for deadline := time.Now().Add(30 * time.Second); readyz() != http.StatusOK; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("not ready 30 s after the Certificate became Ready")
		}
	}

	manifest := strings.Replace(testdata(t, "seed000-single-service.yaml"), "name: lbregistrar-ingress-https", "name: cert-manager-mode", 1)
	kubectl(t, c, manifest, "apply", "-f", "-")
	out, _ = kubectl(t, c, "", "get", "lbregistrars.v1beta1.nodes.peppy-ratio.dev", "cert-manager-mode", "-o", "jsonpath={.spec.services[0].backendSetName}")
	if out != "ingress" {
		t.Errorf("read as v1beta1 through the binary's conversion webhook: backendSetName %q", out)
	}

	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, series := range []string{
		`lbregistrar_webhook_requests_total{code="200",path="/convert"}`,
		`lbregistrar_webhook_requests_total{code="200",path="/validate-nodes-peppy-ratio-dev-v1alpha1-lbregistrar"}`,
	} {
		if !bytes.Contains(metrics, []byte(series)) {
			t.Errorf("/metrics has no %s", series)
		}
	}
}

// freeAddr is a 127.0.0.1 address with a port free at the time of the call.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return fmt.Sprintf("127.0.0.1:%d", l.Addr().(*net.TCPAddr).Port)
}
