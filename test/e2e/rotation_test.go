package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peppy-ratio/lbregistrar/api/v1alpha1"
	"github.com/peppy-ratio/lbregistrar/test/eventually"
	"github.com/peppy-ratio/lbregistrar/test/kube"
)

// The serving certificate and then the CA are rotated while the API server
// keeps calling both webhooks (validation and conversion); not one request
// fails.
func TestRotationUnderLoad(t *testing.T) {
	t.Parallel()
	c := kube.Start(t, kube.Options{})
	ctx := testContext(t)
	rotator := c.Webhooks.Rotator

	stored := alphaObject("rotation-stored")
	if err := c.Client.Create(ctx, stored); err != nil {
		t.Fatal(err)
	}

	var requests, failures atomic.Int64
	var firstFailure atomic.Value
	load, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for worker := range 2 {
		wg.Go(func() {
			for i := 0; load.Err() == nil && i < 5000; i++ {
				// A server-side dry-run create (conversion to the storage
				// version, then validation) and a read that converts back.
				err := c.Client.Create(ctx, alphaObject(fmt.Sprintf("rotation-dry-run-%d-%d", worker, i)), client.DryRunAll)
				if err == nil {
					err = c.Client.Get(ctx, client.ObjectKeyFromObject(stored), &v1alpha1.LBRegistrar{})
				}
				requests.Add(1)
				if err != nil {
					failures.Add(1)
					firstFailure.CompareAndSwap(nil, err.Error())
				}
			}
		})
	}

	// loadRunsPast waits until another loadPerStep request pairs have
	// completed, so the load runs across each step rather than for a time.
	const loadPerStep = 20
	loadRunsPast := func(step string) {
		t.Helper()
		from := requests.Load()
		eventually.Passes(t, time.Minute, 10*time.Millisecond, func() error {
			if n := requests.Load() - from; n < loadPerStep {
				return fmt.Errorf("%d request pairs since %s, want %d", n, step, loadPerStep)
			}
			return nil
		})
	}

	before := servedCertificate(t, c)
	loadRunsPast("the load started")
	// While the CA, created with the cluster, still propagates, the request
	// is kept and the certificate comes once the CA is trusted.
	if err := rotator.RotateServing(ctx); err != nil {
		t.Fatal(err)
	}
	eventually.Passes(t, time.Minute, 200*time.Millisecond, func() error {
		if servedCertificate(t, c).Equal(before) {
			return errors.New("RotateServing did not change the served certificate")
		}
		return nil
	})
	loadRunsPast("the serving certificate was rotated")

	oldCA := secretCA(t, c)
	if err := rotator.RotateCA(ctx); err != nil {
		t.Fatal(err)
	}
	// The rotation completes in three steps, PropagationDelay apart.
	eventually.Passes(t, time.Minute, 200*time.Millisecond, func() error {
		bundle := parseBundle(t, secretData(t, c)["ca.crt"])
		if len(bundle) != 1 || bundle[0].Equal(oldCA[0]) || !servedBy(t, c, bundle[0]) {
			return fmt.Errorf("the CA rotation has not completed: %d CAs in the bundle", len(bundle))
		}
		return nil
	})
	loadRunsPast("the CA rotation completed")
	stopLoad()
	wg.Wait()

	t.Logf("%d request pairs during the rotations, %d failed", requests.Load(), failures.Load())
	if failures.Load() > 0 {
		t.Errorf("%d of %d requests failed during rotation; first: %v", failures.Load(), requests.Load(), firstFailure.Load())
	}
	if requests.Load() < 20 {
		t.Errorf("only %d requests ran during the rotations", requests.Load())
	}
	assertPublished(t, c, secretData(t, c)["ca.crt"])
}

// servedCertificate is the certificate the webhook server presents, verified
// against the CA bundle the webhook configuration has.
func servedCertificate(t *testing.T, c *kube.Cluster) *x509.Certificate {
	t.Helper()
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := c.Client.Get(testContext(t), client.ObjectKey{Name: kube.ValidatingWebhook}, vwc); err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(vwc.Webhooks[0].ClientConfig.CABundle) {
		t.Fatal("the webhook configuration has no CA bundle")
	}
	conn, err := tls.Dial("tcp", c.Webhooks.Server.Addr().String(), &tls.Config{RootCAs: roots, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatalf("the served certificate does not verify against the published bundle: %v", err)
	}
	defer func() { _ = conn.Close() }()
	return conn.ConnectionState().PeerCertificates[0]
}

func servedBy(t *testing.T, c *kube.Cluster, ca *x509.Certificate) bool {
	return servedCertificate(t, c).CheckSignatureFrom(ca) == nil
}

func secretData(t *testing.T, c *kube.Cluster) map[string][]byte {
	t.Helper()
	secret := &corev1.Secret{}
	if err := c.Client.Get(testContext(t), client.ObjectKey{Namespace: kube.Namespace, Name: kube.CertSecret}, secret); err != nil {
		t.Fatal(err)
	}
	return secret.Data
}

func secretCA(t *testing.T, c *kube.Cluster) []*x509.Certificate {
	return parseBundle(t, secretData(t, c)["ca.crt"])
}

func parseBundle(t *testing.T, bundle []byte) []*x509.Certificate {
	t.Helper()
	var certs []*x509.Certificate
	for rest := bundle; len(rest) > 0; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		certs = append(certs, cert)
	}
	return certs
}

// assertPublished checks that the webhook configuration and the CRD have
// bundle.
func assertPublished(t *testing.T, c *kube.Cluster, bundle []byte) {
	t.Helper()
	ctx := testContext(t)
	eventually.Passes(t, 10*time.Second, 100*time.Millisecond, func() error {
		vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Client.Get(ctx, client.ObjectKey{Name: kube.ValidatingWebhook}, vwc); err != nil {
			t.Fatal(err)
		}
		if err := c.Client.Get(ctx, client.ObjectKey{Name: kube.CRDName}, crd); err != nil {
			t.Fatal(err)
		}
		for _, w := range vwc.Webhooks {
			if string(w.ClientConfig.CABundle) != string(bundle) {
				return fmt.Errorf("webhook %s does not have the CA bundle", w.Name)
			}
		}
		if string(crd.Spec.Conversion.Webhook.ClientConfig.CABundle) != string(bundle) {
			return errors.New("the CRD's conversion webhook does not have the CA bundle")
		}
		return nil
	})
}

// alphaObject is a valid v1alpha1 single-service LBRegistrar on a load
// balancer of its own.
func alphaObject(name string) *v1alpha1.LBRegistrar {
	return &v1alpha1.LBRegistrar{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.LBRegistrarSpec{
			LoadBalancerID: "ocid1.loadbalancer.oc1.ap-tokyo-1.aaaaaaaa" + strings.ReplaceAll(name, "-", ""),
			BackendSetName: "ingress",
			Service:        &v1alpha1.ServiceSpec{Name: "istio-ingressgateway", Namespace: "istio-system", Port: intstr.FromString("https")},
			APIKey: v1alpha1.APIKeySpec{
				User:        "ocid1.user.oc1..aaaaaaaaexample",
				Fingerprint: "12:34:56:78:90:ab:cd:ef:12:34:56:78:90:ab:cd:ef",
				Tenancy:     "ocid1.tenancy.oc1..aaaaaaaaexample",
				Region:      "ap-tokyo-1",
				PrivateKey: v1alpha1.SecretKeySpec{
					Namespace:    "lbregistrar-system",
					SecretKeyRef: v1alpha1.SecretKeyRef{Name: "oci-api-key", Key: "private-key"},
				},
			},
		},
	}
}
