package certs_test

import (
	"context"
	"crypto/tls"
	"errors"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peppy-ratio/lbregistrar/certs"
	"github.com/peppy-ratio/lbregistrar/test/eventually"
	"github.com/peppy-ratio/lbregistrar/test/kube"
)

// Replicas starting together against a real API server race to create the
// Secret; one wins, the others adopt its CA, and all serve the same
// certificate and publish the same bundle. A bundle wiped by a re-applied
// manifest is written back on the next sync.
func TestReplicasConvergeOnOneCA(t *testing.T) {
	c := kube.Start(t, kube.Options{Bare: true})
	ctx := context.Background()
	if err := c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "certs"}}); err != nil {
		t.Fatal(err)
	}
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "converge"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    "converge.example.com",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:1/validate")},
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
	if err := c.Client.Create(ctx, vwc); err != nil {
		t.Fatal(err)
	}

	opts := certs.Options{
		Secret:                          types.NamespacedName{Namespace: "certs", Name: "serving"},
		Hosts:                           []string{"127.0.0.1"},
		ValidatingWebhookConfigurations: []string{"converge"},
		SyncInterval:                    100 * time.Millisecond,
		PropagationDelay:                time.Second,
	}
	replicas := make([]*certs.Rotator, 4)
	var wg sync.WaitGroup
	for i := range replicas {
		r, err := certs.NewRotator(c.Config, opts)
		if err != nil {
			t.Fatal(err)
		}
		replicas[i] = r
		wg.Go(func() {
			if err := r.Sync(ctx); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()

	served := func(r *certs.Rotator) string {
		cert, err := r.GetCertificate(&tls.ClientHelloInfo{})
		if err != nil {
			t.Fatal(err)
		}
		return string(cert.Certificate[0])
	}
	for i, r := range replicas {
		if served(r) != served(replicas[0]) {
			t.Errorf("replica %d serves another certificate than replica 0", i)
		}
		if err := r.ReadyCheck(nil); err != nil {
			t.Errorf("replica %d not ready: %v", i, err)
		}
	}
	secret := &corev1.Secret{}
	if err := c.Client.Get(ctx, opts.Secret, secret); err != nil {
		t.Fatal(err)
	}
	bundle := func() []byte {
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(vwc), vwc); err != nil {
			t.Fatal(err)
		}
		return vwc.Webhooks[0].ClientConfig.CABundle
	}
	if string(bundle()) != string(secret.Data["ca.crt"]) {
		t.Fatal("the webhook configuration does not have the Secret's CA bundle")
	}

	vwc.Webhooks[0].ClientConfig.CABundle = nil
	if err := c.Client.Update(ctx, vwc); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go func() { _ = replicas[1].Start(runCtx) }()
	eventually.Passes(t, 10*time.Second, 50*time.Millisecond, func() error {
		if string(bundle()) != string(secret.Data["ca.crt"]) {
			return errors.New("the wiped CA bundle was not written back")
		}
		return nil
	})
}
