package conversion

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
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
	registry := crconversion.NewRegistry()
	if err := registry.RegisterConverter(v1beta1.GroupVersion.WithKind("LBRegistrar").GroupKind(), converter); err != nil {
		t.Fatal(err)
	}
	return crconversion.NewWebhookHandler(scheme, registry)
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
