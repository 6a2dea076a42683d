package conversion

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	goruntime "runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	apix "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	crconversion "sigs.k8s.io/controller-runtime/pkg/webhook/conversion"
	"sigs.k8s.io/yaml"

	"github.com/peppy-ratio/lbregistrar/api"
	"github.com/peppy-ratio/lbregistrar/api/v1alpha1"
	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
)

// TestConversionReview sends one ConversionReview with several objects, odd
// ones among them, through controller-runtime's webhook handler, as the API
// server does: every object converts, in order, and reads back unchanged.
func TestConversionReview(t *testing.T) {
	handler := newReviewHandler(t)
	odd := seedSingleService(t)
	odd.Name = "odd"
	odd.Spec.Port, odd.Spec.NodePort, odd.Spec.Weight = 30443, 30080, 0
	odd.Spec.Services = []v1alpha1.ServiceSpec{}
	odd.Status.Phase = "UNKNOWN-PHASE"
	objects := []*v1alpha1.LBRegistrar{seedSingleService(t), odd}

	hubs := review(t, handler, v1beta1.GroupVersion.String(), objects)
	if len(hubs) != len(objects) {
		t.Fatalf("%d objects converted, want %d", len(hubs), len(objects))
	}
	for i, raw := range hubs {
		var hub v1beta1.LBRegistrar
		if err := json.Unmarshal(raw.Raw, &hub); err != nil {
			t.Fatal(err)
		}
		if hub.Name != objects[i].Name || hub.APIVersion != v1beta1.GroupVersion.String() {
			t.Errorf("object %d is %s %s, want %s in order", i, hub.APIVersion, hub.Name, objects[i].Name)
		}
	}
	back := review(t, handler, v1alpha1.GroupVersion.String(), hubs)
	for i, raw := range back {
		var spoke v1alpha1.LBRegistrar
		if err := json.Unmarshal(raw.Raw, &spoke); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(objects[i], &spoke, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("object %d read back (-want +got):\n%s", i, diff)
		}
	}
}

// seedSingleService is seed 000's single-service LBRegistrar as users of the
// original operator have it (test/testdata).
func seedSingleService(t testing.TB) *v1alpha1.LBRegistrar {
	t.Helper()
	data, err := os.ReadFile("../test/testdata/seed000-single-service.yaml")
	if err != nil {
		t.Fatal(err)
	}
	obj := &v1alpha1.LBRegistrar{}
	if err := yaml.UnmarshalStrict(data, obj); err != nil {
		t.Fatal(err)
	}
	return obj
}

func newReviewHandler(t testing.TB) http.Handler {
	scheme := api.NewScheme()
	converter, err := NewConverter(scheme)
	if err != nil {
		t.Fatal(err)
	}
	return NewHandler(scheme, converter)
}

// controllerRuntimeHandler is controller-runtime's conversion webhook
// handler over the same converter, which NewHandler answers like.
func controllerRuntimeHandler(t testing.TB) http.Handler {
	scheme := api.NewScheme()
	converter, err := NewConverter(scheme)
	if err != nil {
		t.Fatal(err)
	}
	registry := crconversion.NewRegistry()
	if err := registry.RegisterConverter(v1beta1.GroupVersion.WithKind("LBRegistrar").GroupKind(), converter); err != nil {
		t.Fatal(err)
	}
	return crconversion.NewWebhookHandler(scheme, registry)
}

// NewHandler answers every review as controller-runtime's handler does: the
// same status code and the same JSON, converted objects, UID and errors
// alike.
func TestHandlerAnswersAsControllerRuntime(t *testing.T) {
	ours, theirs := newReviewHandler(t), controllerRuntimeHandler(t)
	alpha, err := json.Marshal(seedSingleService(t))
	if err != nil {
		t.Fatal(err)
	}
	reviewOf := func(to string, objects ...string) string {
		return `{"kind":"ConversionReview","apiVersion":"apiextensions.k8s.io/v1","request":{"uid":"u-1","desiredAPIVersion":"` + to +
			`","objects":[` + strings.Join(objects, ",") + `]}}`
	}
	toBeta, toAlpha := v1beta1.GroupVersion.String(), v1alpha1.GroupVersion.String()
	converted := string(review(t, ours, toBeta, []*v1alpha1.LBRegistrar{seedSingleService(t)})[0].Raw)
	bodies := map[string]string{
		"to v1beta1":                     reviewOf(toBeta, string(alpha), string(alpha)),
		"to v1alpha1":                    reviewOf(toAlpha, converted),
		"no type meta on the review":     `{"request":{"uid":"u-2","desiredAPIVersion":"` + toBeta + `","objects":[` + string(alpha) + `]}}`,
		"already in the desired version": reviewOf(toBeta, converted),
		"unknown kind":                   reviewOf(toBeta, `{"apiVersion":"nodes.peppy-ratio.dev/v1alpha1","kind":"Other"}`),
		"no kind":                        reviewOf(toBeta, `{"apiVersion":"nodes.peppy-ratio.dev/v1alpha1"}`),
		"wrong field type":               reviewOf(toBeta, `{"apiVersion":"nodes.peppy-ratio.dev/v1alpha1","kind":"LBRegistrar","spec":{"nodePort":"x"}}`),
		"unknown desired version":        reviewOf("nodes.peppy-ratio.dev/v9", string(alpha)),
		"other group":                    reviewOf("apps/v1", string(alpha)),
		"no request":                     `{"kind":"ConversionReview","apiVersion":"apiextensions.k8s.io/v1"}`,
		"not JSON":                       `{"request":`,
	}
	for name, body := range bodies {
		t.Run(name, func(t *testing.T) {
			got, want := post(ours, body), post(theirs, body)
			if got.Code != want.Code {
				t.Fatalf("status %d, controller-runtime's %d", got.Code, want.Code)
			}
			if diff := cmp.Diff(jsonValue(t, want.Body.Bytes()), jsonValue(t, got.Body.Bytes())); diff != "" {
				t.Errorf("body differs from controller-runtime's (-theirs +ours):\n%s", diff)
			}
		})
	}
}

func post(h http.Handler, body string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, Path, strings.NewReader(body)))
	return rec
}

func jsonValue(t *testing.T, data []byte) any {
	t.Helper()
	if len(data) == 0 {
		return nil
	}
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("%v: %s", err, data)
	}
	return v
}

// review posts a ConversionReview of objects to handler and returns the converted objects.
func review[T any](t testing.TB, handler http.Handler, to string, objects []T) []runtime.RawExtension {
	t.Helper()
	req := apix.ConversionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: apix.SchemeGroupVersion.String(), Kind: "ConversionReview"},
		Request:  &apix.ConversionRequest{UID: "review-1", DesiredAPIVersion: to},
	}
	for _, obj := range objects {
		raw, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		req.Request.Objects = append(req.Request.Objects, runtime.RawExtension{Raw: raw})
	}
	body, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	handler.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/convert", bytes.NewReader(body)))
	var resp apix.ConversionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
		t.Fatalf("response %d %q: %v", rec.Code, rec.Body.String(), err)
	}
	if resp.Response == nil || resp.Response.UID != "review-1" || resp.Response.Result.Status != metav1.StatusSuccess {
		t.Fatalf("conversion failed: %s", rec.Body.String())
	}
	return resp.Response.ConvertedObjects
}

// A caller's Content-Length sizes nothing: a valid review of a few bytes
// that claims to be a terabyte is answered, with memory for what was sent.
func TestContentLengthSizesNothing(t *testing.T) {
	handler := newReviewHandler(t)
	alpha, err := json.Marshal(seedSingleService(t))
	if err != nil {
		t.Fatal(err)
	}
	body := `{"request":{"uid":"u-1","desiredAPIVersion":"` + v1beta1.GroupVersion.String() + `","objects":[` + string(alpha) + `]}}`
	for _, claimed := range []int64{1 << 40, 256 << 20, -1, 3} {
		req := httptest.NewRequest(http.MethodPost, Path, strings.NewReader(body))
		req.ContentLength = claimed
		var before, after goruntime.MemStats
		goruntime.ReadMemStats(&before)
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		goruntime.ReadMemStats(&after)
		if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"status":"Success"`) {
			t.Errorf("Content-Length %d: %d %s", claimed, rec.Code, rec.Body.String())
		}
		if allocated := after.TotalAlloc - before.TotalAlloc; allocated > 4<<20 {
			t.Errorf("Content-Length %d: %d bytes allocated for a %d-byte review", claimed, allocated, len(body))
		}
	}
}
