package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/peppy-ratio/lbregistrar/api/v1alpha1"
	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/conversion"
	"github.com/peppy-ratio/lbregistrar/test/eventually"
	"github.com/peppy-ratio/lbregistrar/test/kube"
	"github.com/peppy-ratio/lbregistrar/webhook"
)

// BenchmarkAPIServerAdmission measures server-side dry-run creates of a
// v1beta1 LBRegistrar through a real API server, eight clients at a time.
// The baseline calls an admit-everything handler on our webhook server
// through the same webhook configuration (rules, failure policy, timeouts,
// TLS); the webhook variant calls our v1beta1 validator there, so its ratio
// and added-p99-ms are what our handler itself costs end to end.
// handler-p99-ms is the time spent inside the handler, as the server sees
// it, which other load on the machine disturbs less. one-client/alternating
// sends the create from one client, alternately through the admit-everything
// handler and ours (two webhooks alike but for the path, picked per object
// by a label), so both p99s are measured under the same load and
// added-p99-ms is their difference. no-webhook is the same create with no
// validating webhook registered at all.
func BenchmarkAPIServerAdmission(b *testing.B) {
	c := kube.Start(b, kube.Options{})
	ctx := context.Background()
	valid := betaObject("bench-valid", "12:34:56:78:90:ab:cd:ef:12:34:56:78:90:ab:cd:ef")
	invalid := betaObject("bench-invalid", "not-a-fingerprint")
	bundle, err := c.Webhooks.CABundle(ctx, c.Config)
	if err != nil {
		b.Fatal(err)
	}
	admitEverything := &timedHandler{next: &admission.Webhook{Handler: admission.HandlerFunc(
		func(context.Context, admission.Request) admission.Response { return admission.Allowed("") })}}
	// Ours as webhook.Register builds it, timed the same way.
	validator := &timedHandler{next: webhook.NewV1beta1Validator(c.Webhooks.Manager.GetCache(),
		webhook.IdentityPolicy{Reviewer: c.Webhooks.Manager.GetClient(), Grants: webhook.NewGrantCache(webhook.GrantTTL)},
		"system:serviceaccount:lbregistrar-system:lbregistrar")}
	c.Webhooks.Server.Register("/bench-admit-everything", admitEverything)
	c.Webhooks.Server.Register("/bench-validate", validator)

	var baselineP99 float64
	b.Run("dry-run-create/baseline", func(b *testing.B) {
		if err := c.InstallValidatingWebhookAtPath(ctx, c.Webhooks.URL, "/bench-admit-everything", bundle); err != nil {
			b.Fatal(err)
		}
		// The invalid object is admitted without a webhook too: wait until
		// the admit-everything handler is the one admitting it.
		eventually.Passes(b, 30*time.Second, 100*time.Millisecond, func() error {
			admitEverything.reset()
			if err := c.Client.Create(ctx, invalid.DeepCopy(), client.DryRunAll); err != nil {
				return err
			}
			if admitEverything.count() == 0 {
				return errors.New("the API server does not call the admit-everything webhook yet")
			}
			return nil
		})
		admitEverything.reset()
		baselineP99 = measureCreates(b, c, valid)
		b.ReportMetric(admitEverything.p99(), "handler-p99-ms")
	})
	b.Run("dry-run-create/webhook", func(b *testing.B) {
		if err := c.InstallValidatingWebhookAtPath(ctx, c.Webhooks.URL, "/bench-validate", bundle); err != nil {
			b.Fatal(err)
		}
		waitAdmits(b, c, invalid, false)
		validator.reset()
		b.ReportMetric(measureCreates(b, c, valid)-baselineP99, "added-p99-ms")
		b.ReportMetric(validator.p99(), "handler-p99-ms")
	})
	b.Run("one-client/alternating", func(b *testing.B) {
		routeByLabel(b, c, bundle)
		viaBaseline, viaOurs := labelled(valid, benchRoute, "admit-everything"), labelled(valid, benchRoute, "validator")
		waitAdmits(b, c, labelled(invalid, benchRoute, "validator"), false)
		waitAdmits(b, c, labelled(invalid, benchRoute, "admit-everything"), true)
		var base, ours []time.Duration
		create := func(obj *v1beta1.LBRegistrar, into *[]time.Duration) {
			t0 := time.Now()
			if err := c.Client.Create(ctx, obj.DeepCopy(), client.DryRunAll); err != nil {
				b.Fatal(err)
			}
			*into = append(*into, time.Since(t0))
		}
		for b.Loop() {
			// Pairs, in alternating order, so both see the same load; enough
			// of them that the 99th percentile is not a handful of requests.
			for i := range alternatingPairs {
				if i%2 == 0 {
					create(viaBaseline, &base)
					create(viaOurs, &ours)
				} else {
					create(viaOurs, &ours)
					create(viaBaseline, &base)
				}
			}
		}
		baseP50, baseP99 := percentile(base, 0.50), percentile(base, 0.99)
		oursP50, oursP99 := percentile(ours, 0.50), percentile(ours, 0.99)
		b.ReportMetric(baseP99, "admit-everything-p99-ms")
		b.ReportMetric(oursP99, "webhook-p99-ms")
		b.ReportMetric(oursP50-baseP50, "added-p50-ms")
		b.ReportMetric(oursP99-baseP99, "added-p99-ms")
	})
	b.Run("dry-run-create/no-webhook", func(b *testing.B) {
		vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		vwc.Name = kube.ValidatingWebhook
		if err := c.Client.Delete(ctx, vwc); err != nil && !apierrors.IsNotFound(err) {
			b.Fatal(err)
		}
		waitAdmits(b, c, invalid, true)
		measureCreates(b, c, valid)
	})
}

// alternatingPairs is how many creates one-client/alternating sends through
// each webhook per iteration.
const alternatingPairs = 1000

// benchRoute is the label routeByLabel sends requests by.
const benchRoute = "bench.lbregistrar/route"

// routeByLabel makes the v1beta1 webhook of the installed configuration two,
// the same but for the path: objects labelled benchRoute=admit-everything go
// to the admit-everything handler, benchRoute=validator to ours.
func routeByLabel(b *testing.B, c *kube.Cluster, bundle []byte) {
	ctx := context.Background()
	if err := c.InstallValidatingWebhookAtPath(ctx, c.Webhooks.URL, "/bench-validate", bundle); err != nil {
		b.Fatal(err)
	}
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := c.Client.Get(ctx, types.NamespacedName{Name: kube.ValidatingWebhook}, vwc); err != nil {
		b.Fatal(err)
	}
	for _, w := range vwc.Webhooks {
		if !slices.Contains(w.Rules[0].APIVersions, "v1beta1") {
			continue
		}
		ours, baseline := w.DeepCopy(), w.DeepCopy()
		ours.ObjectSelector = &metav1.LabelSelector{MatchLabels: map[string]string{benchRoute: "validator"}}
		baseline.Name = "admit-everything." + w.Name
		baseline.ClientConfig.URL = ptr.To(c.Webhooks.URL + "/bench-admit-everything")
		baseline.ObjectSelector = &metav1.LabelSelector{MatchLabels: map[string]string{benchRoute: "admit-everything"}}
		vwc.Webhooks = []admissionregistrationv1.ValidatingWebhook{*ours, *baseline}
		break
	}
	if err := c.Client.Update(ctx, vwc); err != nil {
		b.Fatal(err)
	}
}

func labelled(obj *v1beta1.LBRegistrar, key, value string) *v1beta1.LBRegistrar {
	obj = obj.DeepCopy()
	obj.Labels = map[string]string{key: value}
	return obj
}

// timedHandler records how long next takes to answer each request.
type timedHandler struct {
	next      http.Handler
	mu        sync.Mutex
	durations []time.Duration
}

func (h *timedHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	t0 := time.Now()
	h.next.ServeHTTP(w, r)
	d := time.Since(t0)
	h.mu.Lock()
	h.durations = append(h.durations, d)
	h.mu.Unlock()
}

func (h *timedHandler) reset() {
	h.mu.Lock()
	h.durations = nil
	h.mu.Unlock()
}

func (h *timedHandler) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.durations)
}

// p99 is the 99th percentile of the recorded durations in milliseconds.
func (h *timedHandler) p99() float64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return percentile(h.durations, 0.99)
}

// waitAdmits waits until the API server admits obj (no webhook) or refuses
// it (webhook in place), which tells that it has seen the configuration.
func waitAdmits(b *testing.B, c *kube.Cluster, obj *v1beta1.LBRegistrar, admit bool) {
	b.Helper()
	eventually.Passes(b, 30*time.Second, 100*time.Millisecond, func() error {
		err := c.Client.Create(context.Background(), obj.DeepCopy(), client.DryRunAll)
		if (err == nil) != admit {
			return fmt.Errorf("the API server has not picked up the webhook configuration (admit=%v): %w", admit, err)
		}
		return nil
	})
}

// measureCreates reports the creates' rate and latencies and returns their
// 99th percentile in milliseconds.
func measureCreates(b *testing.B, c *kube.Cluster, obj *v1beta1.LBRegistrar) float64 {
	var mu sync.Mutex
	var latencies []time.Duration
	b.SetParallelism(4)
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		var mine []time.Duration
		for pb.Next() {
			t0 := time.Now()
			if err := c.Client.Create(context.Background(), obj.DeepCopy(), client.DryRunAll); err != nil {
				b.Error(err)
				return
			}
			mine = append(mine, time.Since(t0))
		}
		mu.Lock()
		latencies = append(latencies, mine...)
		mu.Unlock()
	})
	elapsed := time.Since(start)
	b.StopTimer()
	return reportLatencies(b, latencies, elapsed, "req/s")
}

// BenchmarkConversionReview posts one ConversionReview of 1,000 v1alpha1
// objects to the conversion webhook over TLS (convert). The baseline is the
// least any conversion webhook does with the same objects, in process:
// decode each, convert it with package conversion's converter, encode it;
// the ratio is what serving it costs on top (TLS, the review's own JSON,
// the handler's allocations). drain-only posts the same body over TLS to a
// handler on the same server that only reads it.
func BenchmarkConversionReview(b *testing.B) {
	c := shared(b)
	ctx := context.Background()
	review, objects := conversionReview(b, 1000)
	bundle, err := c.Webhooks.CABundle(ctx, c.Config)
	if err != nil {
		b.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(bundle)
	httpClient := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}}
	registerDrain.Do(func() {
		c.Webhooks.Server.Register("/bench-drain", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			_, _ = w.Write([]byte(`{}`))
		}))
	})
	converter, err := conversion.NewConverter(c.Scheme)
	if err != nil {
		b.Fatal(err)
	}

	b.Run("1000-objects/baseline", func(b *testing.B) {
		b.SetBytes(int64(len(review)))
		b.ReportAllocs()
		for b.Loop() {
			for _, raw := range objects {
				spoke := &v1alpha1.LBRegistrar{}
				if err := json.Unmarshal(raw.Raw, spoke); err != nil {
					b.Fatal(err)
				}
				hub := &v1beta1.LBRegistrar{TypeMeta: metav1.TypeMeta{APIVersion: v1beta1.GroupVersion.String(), Kind: "LBRegistrar"}}
				if err := converter.ConvertObject(ctx, spoke, hub); err != nil {
					b.Fatal(err)
				}
				if _, err := json.Marshal(hub); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	for _, run := range []struct{ variant, path string }{{"convert", conversion.Path}, {"drain-only", "/bench-drain"}} {
		b.Run("1000-objects/"+run.variant, func(b *testing.B) {
			var latencies []time.Duration
			b.SetBytes(int64(len(review)))
			start := time.Now()
			for b.Loop() {
				t0 := time.Now()
				resp, err := httpClient.Post(c.Webhooks.URL+run.path, "application/json", bytes.NewReader(review))
				if err != nil {
					b.Fatal(err)
				}
				body, err := io.ReadAll(resp.Body)
				_ = resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusOK {
					b.Fatalf("status %d: %v %s", resp.StatusCode, err, body)
				}
				latencies = append(latencies, time.Since(t0))
				if run.variant == "convert" && len(latencies) == 1 {
					assertConverted(b, body, 1000)
				}
			}
			elapsed := time.Since(start)
			reportLatencies(b, latencies, elapsed, "reviews/s")
			b.ReportMetric(float64(len(latencies))*1000/elapsed.Seconds(), "objects/s")
		})
	}
}

var registerDrain sync.Once

// conversionReview is a ConversionReview of n v1alpha1 objects to v1beta1,
// and the objects.
func conversionReview(b *testing.B, n int) ([]byte, []runtime.RawExtension) {
	b.Helper()
	objects := make([]runtime.RawExtension, n)
	for i := range objects {
		obj := alphaObject(fmt.Sprintf("bench-%04d", i))
		obj.APIVersion, obj.Kind = "nodes.peppy-ratio.dev/v1alpha1", "LBRegistrar"
		obj.UID = types.UID(fmt.Sprintf("00000000-0000-0000-0000-%012d", i))
		raw, err := json.Marshal(obj)
		if err != nil {
			b.Fatal(err)
		}
		objects[i] = runtime.RawExtension{Raw: raw}
	}
	review, err := json.Marshal(&apiextensionsv1.ConversionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "ConversionReview"},
		Request:  &apiextensionsv1.ConversionRequest{UID: "bench", DesiredAPIVersion: "nodes.peppy-ratio.dev/v1beta1", Objects: objects},
	})
	if err != nil {
		b.Fatal(err)
	}
	return review, objects
}

func assertConverted(b *testing.B, body []byte, n int) {
	var review apiextensionsv1.ConversionReview
	if err := json.Unmarshal(body, &review); err != nil {
		b.Fatal(err)
	}
	if r := review.Response; r == nil || r.Result.Status != metav1.StatusSuccess || len(r.ConvertedObjects) != n {
		b.Fatalf("conversion failed: %+v", review.Response)
	}
}

// reportLatencies adds throughput and the median and 99th percentile, and
// returns the 99th percentile in milliseconds.
func reportLatencies(b *testing.B, latencies []time.Duration, elapsed time.Duration, rateUnit string) float64 {
	if len(latencies) == 0 {
		return 0
	}
	b.ReportMetric(float64(len(latencies))/elapsed.Seconds(), rateUnit)
	b.ReportMetric(percentile(latencies, 0.50), "p50-ms")
	p99 := percentile(latencies, 0.99)
	b.ReportMetric(p99, "p99-ms")
	return p99
}

// percentile is the q quantile of durations in milliseconds; it sorts them.
func percentile(durations []time.Duration, q float64) float64 {
	if len(durations) == 0 {
		return 0
	}
	slices.Sort(durations)
	return float64(durations[int(q*float64(len(durations)-1))].Microseconds()) / 1000
}

func betaObject(name, fingerprint string) *v1beta1.LBRegistrar {
	return &v1beta1.LBRegistrar{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1beta1.LBRegistrarSpec{
			LoadBalancerID: "ocid1.loadbalancer.oc1.ap-tokyo-1.aaaaaaaabench",
			Services:       []v1beta1.Target{{NodePort: 30443, BackendSetName: "bench", Weight: 1}},
			APIKey: &v1beta1.APIKey{
				User:        "ocid1.user.oc1..aaaaaaaaexample",
				Fingerprint: fingerprint,
				Tenancy:     "ocid1.tenancy.oc1..aaaaaaaaexample",
				Region:      "ap-tokyo-1",
				PrivateKey: v1beta1.SecretKeySource{
					Namespace:    "lbregistrar-system",
					SecretKeyRef: v1beta1.SecretKeyRef{Name: "oci-api-key", Key: "private-key"},
				},
			},
		},
	}
}
