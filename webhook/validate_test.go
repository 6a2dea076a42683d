package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/peppy-ratio/lbregistrar/api"
	"github.com/peppy-ratio/lbregistrar/api/v1alpha1"
	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/api/validation"
	"github.com/peppy-ratio/lbregistrar/index"
)

const (
	testNLB = "ocid1.networkloadbalancer.oc1.ap-tokyo-1.amaaaaaaexample"
	testLB  = "ocid1.loadbalancer.oc1.ap-tokyo-1.aaaaaaaaexample"
)

func apiKey() *v1beta1.APIKey {
	return &v1beta1.APIKey{
		User:        "ocid1.user.oc1..aaaaaaaaexampleuser",
		Tenancy:     "ocid1.tenancy.oc1..aaaaaaaaexampletenancy",
		Fingerprint: "12:34:56:78:9a:bc:de:f0:12:34:56:78:9a:bc:de:f0",
		Region:      "ap-tokyo-1",
		PrivateKey:  v1beta1.SecretKeySource{Namespace: "lbregistrar-system", SecretKeyRef: v1beta1.SecretKeyRef{Name: "oci-api-key", Key: "private-key"}},
	}
}

// hubObject is a valid v1beta1 LBRegistrar with one target per backend set.
func hubObject(name, lb string, backendSets ...string) *v1beta1.LBRegistrar {
	obj := &v1beta1.LBRegistrar{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1beta1.GroupVersion.String(), Kind: "LBRegistrar"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1beta1.LBRegistrarSpec{LoadBalancerID: lb, APIKey: apiKey()},
	}
	for i, set := range backendSets {
		obj.Spec.Services = append(obj.Spec.Services, v1beta1.Target{NodePort: int32(30000 + i), BackendSetName: set, Weight: 1})
	}
	return obj
}

// alphaObject is the seed's single-service v1alpha1 LBRegistrar.
func alphaObject(name, backendSet string) *v1alpha1.LBRegistrar {
	key := apiKey()
	return &v1alpha1.LBRegistrar{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "LBRegistrar"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.LBRegistrarSpec{
			LoadBalancerID: testNLB,
			BackendSetName: backendSet,
			Weight:         1,
			Service:        &v1alpha1.ServiceSpec{Name: "istio-ingressgateway", Namespace: "istio-system", Port: intstr.FromString("https")},
			APIKey: v1alpha1.APIKeySpec{
				User: key.User, Tenancy: key.Tenancy, Fingerprint: key.Fingerprint, Region: key.Region,
				PrivateKey: v1alpha1.SecretKeySpec{Namespace: key.PrivateKey.Namespace, SecretKeyRef: v1alpha1.SecretKeyRef(key.PrivateKey.SecretKeyRef)},
			},
		},
	}
}

// handlers serves both validating webhooks using a fake client with
// existing as the cache, and every writer allowed to get every Secret.
func handlers(t testing.TB, existing ...client.Object) http.Handler {
	t.Helper()
	return handlersWith(t, IdentityPolicy{Reviewer: secretReaders(nil)}, existing...)
}

func handlersWith(t testing.TB, secrets IdentityPolicy, existing ...client.Object) http.Handler {
	t.Helper()
	scheme := api.NewScheme()
	claims := fake.NewClientBuilder().WithScheme(scheme).
		WithIndex(&v1beta1.LBRegistrar{}, index.ClaimField, index.ClaimFieldKeys).
		WithObjects(existing...).Build()
	mux := http.NewServeMux()
	mux.Handle(ValidateV1alpha1Path, NewV1alpha1Validator(claims, secrets, controllerUser))
	mux.Handle(ValidateV1beta1Path, NewV1beta1Validator(claims, secrets, controllerUser))
	return mux
}

// secretReaders answers SubjectAccessReviews as an API server would where
// each user may get the Secrets ("namespace/name") readers lists, and
// nothing else; nil readers allow everything.
func secretReaders(readers map[string][]string) client.Client {
	if readers == nil {
		return grantedRights(nil)
	}
	rights := map[string][]string{}
	for user, secrets := range readers {
		for _, ref := range secrets {
			rights[user] = append(rights[user], "get secrets "+ref)
		}
	}
	return grantedRights(rights)
}

// grantedRights answers SubjectAccessReviews as an API server would where
// each user has the rights listed ("verb resource[/subresource]
// [namespace/]name", the group left out), and no other; nil allows
// everything.
func grantedRights(rights map[string][]string) client.Client {
	return fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
		Create: func(_ context.Context, _ client.WithWatch, obj client.Object, _ ...client.CreateOption) error {
			sar := obj.(*authorizationv1.SubjectAccessReview)
			a := sar.Spec.ResourceAttributes
			resource, name := a.Resource, a.Name
			if a.Subresource != "" {
				resource += "/" + a.Subresource
			}
			if a.Namespace != "" {
				name = a.Namespace + "/" + name
			}
			sar.Status.Allowed = rights == nil || slices.Contains(rights[sar.Spec.User], a.Verb+" "+resource+" "+name)
			return nil
		},
	}).Build()
}

// writer is the user the API server names in review's requests.
const writer = "admin"

// review is the AdmissionReview JSON the API server sends for obj (and old),
// written by writer.
func review(t testing.TB, op admissionv1.Operation, obj, old runtime.Object) []byte {
	t.Helper()
	return reviewBy(t, writer, op, obj, old)
}

// reviewBy is review written by user.
func reviewBy(t testing.TB, user string, op admissionv1.Operation, obj, old runtime.Object) []byte {
	t.Helper()
	gvk := obj.GetObjectKind().GroupVersionKind()
	req := &admissionv1.AdmissionRequest{
		UID:       "705ab4f5-6393-11e8-b7cc-42010a800002",
		Kind:      metav1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind},
		Resource:  metav1.GroupVersionResource{Group: gvk.Group, Version: gvk.Version, Resource: "lbregistrars"},
		Name:      obj.(client.Object).GetName(),
		Operation: op,
		UserInfo:  authenticationv1.UserInfo{Username: user, Groups: []string{"system:authenticated"}},
		Object:    runtime.RawExtension{Raw: mustJSON(t, obj)},
	}
	if old != nil {
		req.OldObject = runtime.RawExtension{Raw: mustJSON(t, old)}
	}
	if op == admissionv1.Delete {
		req.Object, req.OldObject = runtime.RawExtension{}, runtime.RawExtension{Raw: mustJSON(t, obj)}
	}
	return mustJSON(t, &admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request:  req,
	})
}

// controllerUser is the username the handlers take for the controller's.
const controllerUser = "system:serviceaccount:lbregistrar-system:lbregistrar"

// statusReviewBy is an update of the status subresource written by user.
func statusReviewBy(t testing.TB, user string, obj, old runtime.Object) []byte {
	t.Helper()
	var r admissionv1.AdmissionReview
	if err := json.Unmarshal(reviewBy(t, user, admissionv1.Update, obj, old), &r); err != nil {
		t.Fatal(err)
	}
	r.Request.SubResource = "status"
	return mustJSON(t, &r)
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// post sends body to path and records the handler's answer.
func post(h http.Handler, path string, body []byte) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// admissionResponse decodes the AdmissionReview a handler answered with and
// fails the test unless it is one that carries a response.
func admissionResponse(t testing.TB, rec *httptest.ResponseRecorder) *admissionv1.AdmissionResponse {
	t.Helper()
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatalf("HTTP %d, response is not an AdmissionReview: %v\n%s", rec.Code, err, rec.Body)
	}
	if out.Response == nil {
		t.Fatalf("HTTP %d, no response in %s", rec.Code, rec.Body)
	}
	return out.Response
}

// send posts body to path and decodes the AdmissionReview that comes back.
func send(t testing.TB, h http.Handler, path string, body []byte) *admissionv1.AdmissionResponse {
	t.Helper()
	rec := post(h, path, body)
	if rec.Code != http.StatusOK {
		t.Fatalf("HTTP %d: %s", rec.Code, rec.Body)
	}
	return admissionResponse(t, rec)
}

func causeFields(resp *admissionv1.AdmissionResponse) []string {
	if resp.Result == nil || resp.Result.Details == nil {
		return nil
	}
	var fields []string
	for _, c := range resp.Result.Details.Causes {
		fields = append(fields, c.Field)
	}
	return fields
}

func TestValidatingWebhooks(t *testing.T) {
	owner := hubObject("owner", testNLB, "ingress")
	owner.CreationTimestamp = metav1.NewTime(time.Now().Add(-time.Hour)) // before any resource naming it
	h := handlers(t, owner, hubObject("elsewhere", testLB, "ingress"))

	manyMistakes := hubObject("broken", "lb-1", "bad name", "ok")
	manyMistakes.Spec.APIKey.Fingerprint = "12:34"
	manyMistakes.Spec.APIKey.Region = ""
	manyMistakes.Spec.Services[1].Weight = 0

	mixed := alphaObject("mixed", "other")
	mixed.Spec.Services = []v1alpha1.ServiceSpec{{Name: "web", Namespace: "default", Port: intstr.FromInt32(80), BackendSetName: "web"}}
	mixedEdited := mixed.DeepCopy()
	mixedEdited.Spec.Services[0].Weight = 5

	moved := hubObject("owner", testLB, "fresh")

	// A v1alpha1 object smuggling a status (an ownership record of someone
	// else's backend) and spec values v1alpha1 cannot show past the rules.
	forged := alphaObject("forged", "other")
	forged.Annotations = map[string]string{v1alpha1.HubDataAnnotation: string(mustJSON(t, map[string]any{
		"spec": v1beta1.LBRegistrarSpec{
			LoadBalancerID: testNLB,
			APIKey:         apiKey(),
			Services: []v1beta1.Target{
				{Name: "istio-ingressgateway", Namespace: "istio-system", BackendSetName: "other", Weight: 1},
				{NodePort: 70000, BackendSetName: "ingress", Weight: 1000},
			},
		},
		"status": v1beta1.LBRegistrarStatus{BackendSets: []v1beta1.BackendSetStatus{
			{Name: "ingress", Backends: v1beta1.GroupBackends([]v1beta1.Backend{{IP: "10.0.0.99", Port: 30443, Weight: 1}})},
		}},
	}))}
	// What a v1alpha1 client reads of a stored object with a status, and
	// the same object edited as kubectl edit or apply would.
	stored := hubObject("stored", testNLB, "kept")
	stored.Status.BackendSets = []v1beta1.BackendSetStatus{{Name: "kept", Backends: v1beta1.GroupBackends([]v1beta1.Backend{{IP: "10.0.0.1", Port: 30000, Weight: 1}})}}
	read := &v1alpha1.LBRegistrar{}
	v1alpha1.FromHub(stored, read)
	edited := read.DeepCopy()
	edited.Spec.Weight = 7
	tampered := edited.DeepCopy()
	tampered.Annotations[v1alpha1.HubDataAnnotation] = strings.Replace(tampered.Annotations[v1alpha1.HubDataAnnotation], "10.0.0.1", "10.0.0.99", 1)
	stripped := edited.DeepCopy()
	delete(stripped.Annotations, v1alpha1.HubDataAnnotation)
	fromAlpha := hubObject("from-alpha", testNLB, "kept")
	fromAlpha.Annotations = map[string]string{v1alpha1.AlphaSpecAnnotation: `{"loadBalancerId":"` + testNLB + `","nodePort":30000}`}
	fromAlphaEdited := fromAlpha.DeepCopy()
	fromAlphaEdited.Spec.Services[0].Weight = 3
	fromAlphaStripped := fromAlphaEdited.DeepCopy()
	fromAlphaStripped.Annotations = nil
	hubData := "metadata.annotations[" + v1alpha1.HubDataAnnotation + "]"
	fixedPortWarnings := []string{"spec.nodePort is deprecated", "spec.weight is deprecated", "spec.backendSetName is deprecated"}

	tests := []struct {
		name      string
		path      string
		body      []byte
		allowed   bool
		causes    []string
		warnings  []string // substrings, one per expected warning
		inMessage string
	}{
		{name: "v1beta1 valid create", path: ValidateV1beta1Path,
			body: review(t, admissionv1.Create, hubObject("new", testNLB, "other"), nil), allowed: true},
		{name: "v1beta1 every mistake is a cause", path: ValidateV1beta1Path,
			body: review(t, admissionv1.Create, manyMistakes, nil),
			causes: []string{"spec.loadBalancerId", "spec.apiKey.region", "spec.apiKey.fingerprint",
				"spec.services[0].backendSetName", "spec.services[1].weight"}},
		{name: "v1beta1 claim conflict names the other resource", path: ValidateV1beta1Path,
			body:   review(t, admissionv1.Create, hubObject("second", testNLB, "ingress"), nil),
			causes: []string{"spec.services[0].backendSetName"}, inMessage: `already claimed by LBRegistrar "owner"`},
		{name: "v1beta1 replacement may overlap", path: ValidateV1beta1Path,
			body: review(t, admissionv1.Create, func() runtime.Object {
				obj := hubObject("merged", testNLB, "ingress", "other")
				obj.Annotations = map[string]string{validation.ReplacesAnnotation: "owner"}
				return obj
			}(), nil), allowed: true},
		{name: "v1beta1 update of the owner itself", path: ValidateV1beta1Path,
			body: review(t, admissionv1.Update, hubObject("owner", testNLB, "ingress", "more"), owner), allowed: true},
		{name: "v1beta1 load balancer is immutable", path: ValidateV1beta1Path,
			body: review(t, admissionv1.Update, moved, owner), causes: []string{"spec.loadBalancerId"}, inMessage: "immutable"},
		{name: "v1beta1 delete", path: ValidateV1beta1Path,
			body: review(t, admissionv1.Delete, owner, nil), allowed: true},

		{name: "v1alpha1 single service warns of deprecated fields", path: ValidateV1alpha1Path,
			body: review(t, admissionv1.Create, alphaObject("alpha", "other"), nil), allowed: true,
			warnings: []string{"spec.service is deprecated: use spec.services", "spec.backendSetName is deprecated"}},
		{name: "v1alpha1 claim conflict on the field written", path: ValidateV1alpha1Path,
			body:   review(t, admissionv1.Create, alphaObject("alpha", "ingress"), nil),
			causes: []string{"spec.backendSetName"}, inMessage: `"owner"`,
			warnings: []string{"spec.service is deprecated", "spec.backendSetName is deprecated"}},
		{name: "v1alpha1 mixing is refused on create", path: ValidateV1alpha1Path,
			body: review(t, admissionv1.Create, mixed, nil), causes: []string{"spec.service"},
			warnings: []string{"spec.service is deprecated", "spec.backendSetName is deprecated"}},
		{name: "v1alpha1 mixing only warns on update", path: ValidateV1alpha1Path,
			body: review(t, admissionv1.Update, mixedEdited, mixed), allowed: true,
			warnings: []string{"spec.service: Forbidden", "spec.service is deprecated", "spec.backendSetName is deprecated"}},

		{name: "v1alpha1 forged conversion annotation: refused, and what it hides is checked as stored", path: ValidateV1alpha1Path,
			body: review(t, admissionv1.Create, forged, nil),
			causes: []string{hubData + ".spec.services[1].nodePort", hubData + ".spec.services[1].weight", hubData,
				hubData + ".spec.services[1].backendSetName"},
			inMessage: "written only by conversion",
			warnings:  []string{"spec.service is deprecated", "spec.backendSetName is deprecated"}},
		{name: "v1alpha1 update sending the stored conversion annotation back", path: ValidateV1alpha1Path,
			body: review(t, admissionv1.Update, edited, read), allowed: true,
			warnings: fixedPortWarnings},
		{name: "v1alpha1 update changing the conversion annotation", path: ValidateV1alpha1Path,
			body: review(t, admissionv1.Update, tampered, read), causes: []string{hubData}, inMessage: "written only by conversion",
			warnings: fixedPortWarnings},
		{name: "v1alpha1 update removing the conversion annotation", path: ValidateV1alpha1Path,
			body: review(t, admissionv1.Update, stripped, read), causes: []string{hubData}, inMessage: "would reset the status",
			warnings: fixedPortWarnings},
		{name: "v1beta1 create with a conversion annotation", path: ValidateV1beta1Path,
			body:   review(t, admissionv1.Create, fromAlpha, nil),
			causes: []string{"metadata.annotations[" + v1alpha1.AlphaSpecAnnotation + "]"}, inMessage: "written only by conversion"},
		{name: "v1beta1 update keeping the conversion annotation", path: ValidateV1beta1Path,
			body: review(t, admissionv1.Update, fromAlphaEdited, fromAlpha), allowed: true},
		{name: "v1beta1 update dropping the v1alpha1 form", path: ValidateV1beta1Path,
			body: review(t, admissionv1.Update, fromAlphaStripped, fromAlpha), allowed: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := send(t, h, tt.path, tt.body)
			if resp.UID != "705ab4f5-6393-11e8-b7cc-42010a800002" {
				t.Errorf("UID = %q", resp.UID)
			}
			if resp.Allowed != tt.allowed {
				t.Fatalf("allowed = %v, want %v: %+v", resp.Allowed, tt.allowed, resp.Result)
			}
			if !tt.allowed {
				if resp.Result.Code != http.StatusUnprocessableEntity || resp.Result.Reason != metav1.StatusReasonInvalid {
					t.Errorf("status = %d %s, want 422 Invalid", resp.Result.Code, resp.Result.Reason)
				}
				if got := causeFields(resp); strings.Join(got, ",") != strings.Join(tt.causes, ",") {
					t.Errorf("causes = %q, want %q", got, tt.causes)
				}
				if !strings.Contains(resp.Result.Message, tt.inMessage) {
					t.Errorf("message %q does not contain %q", resp.Result.Message, tt.inMessage)
				}
			}
			if len(resp.Warnings) != len(tt.warnings) {
				t.Fatalf("warnings = %q, want %d", resp.Warnings, len(tt.warnings))
			}
			for i, w := range tt.warnings {
				if !strings.Contains(resp.Warnings[i], w) {
					t.Errorf("warning %d = %q, want it to contain %q", i, resp.Warnings[i], w)
				}
			}
		})
	}
}

// Only the controller may change the ownership record through the status
// subresource; anyone else may write the rest of status, and a phase
// written through v1alpha1 (as the original operator does) changes only
// the Ready condition, which is allowed.
func TestOnlyTheControllerWritesTheRecord(t *testing.T) {
	h := handlers(t)
	stored := hubObject("stored", testNLB, "kept")
	stored.UID = "uid-1"
	stored.Status.LoadBalancerID = testNLB
	stored.Status.RecordSignature = "v1.signed"
	stored.Status.BackendSets = []v1beta1.BackendSetStatus{{Name: "kept", Backends: v1beta1.GroupBackends([]v1beta1.Backend{{IP: "10.0.0.1", Port: 30000, Weight: 1}})}}
	stored.Status.Conditions = []metav1.Condition{{Type: v1beta1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1beta1.ReasonRegistered, LastTransitionTime: metav1.Unix(1, 0)}}
	changed := func(change func(*v1beta1.LBRegistrar)) *v1beta1.LBRegistrar {
		obj := stored.DeepCopy()
		change(obj)
		return obj
	}
	foreign := changed(func(o *v1beta1.LBRegistrar) {
		o.Status.BackendSets[0].Backends = append(o.Status.BackendSets[0].Backends, v1beta1.BackendGroup{Port: 8080, Weight: 1, Addresses: "192.168.9.9"})
	})
	elsewhere := changed(func(o *v1beta1.LBRegistrar) { o.Status.LoadBalancerID = testLB; o.Status.RecordSignature = "v1.other" })
	conditions := changed(func(o *v1beta1.LBRegistrar) { o.Status.Conditions[0].Status = metav1.ConditionFalse })
	alphaStored := &v1alpha1.LBRegistrar{}
	v1alpha1.FromHub(stored, alphaStored)
	pending := alphaStored.DeepCopy()
	pending.Status.Phase = v1alpha1.PhasePending
	forgedAlpha := alphaStored.DeepCopy()
	forgedAlpha.Annotations[v1alpha1.HubDataAnnotation] = strings.Replace(forgedAlpha.Annotations[v1alpha1.HubDataAnnotation], "10.0.0.1", "192.168.9.9", 1)

	tests := []struct {
		name    string
		path    string
		body    []byte
		allowed bool
		causes  []string
	}{
		{"the controller records a backend", ValidateV1beta1Path, statusReviewBy(t, controllerUser, foreign, stored), true, nil},
		{"another writer adds a backend", ValidateV1beta1Path, statusReviewBy(t, writer, foreign, stored), false,
			[]string{"status.backendSets"}},
		{"another writer points the record elsewhere", ValidateV1beta1Path, statusReviewBy(t, writer, elsewhere, stored), false,
			[]string{"status.loadBalancerId", "status.recordSignature"}},
		{"another writer empties the record", ValidateV1beta1Path, statusReviewBy(t, writer, changed(func(o *v1beta1.LBRegistrar) { ownershipDrop(o) }), stored), false,
			[]string{"status.loadBalancerId", "status.backendSets", "status.recordSignature"}},
		{"another writer sets conditions", ValidateV1beta1Path, statusReviewBy(t, writer, conditions, stored), true, nil},
		{"a v1alpha1 phase write", ValidateV1alpha1Path, statusReviewBy(t, writer, pending, alphaStored), true, nil},
		{"a v1alpha1 status write with a forged record", ValidateV1alpha1Path, statusReviewBy(t, writer, forgedAlpha, alphaStored), false,
			[]string{"status.backendSets"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := failureCount(t, "v1beta1", validation.RuleOwnershipRecord) + failureCount(t, "v1alpha1", validation.RuleOwnershipRecord)
			resp := send(t, h, tt.path, tt.body)
			if resp.Allowed != tt.allowed {
				t.Fatalf("allowed = %v, want %v: %+v", resp.Allowed, tt.allowed, resp.Result)
			}
			if tt.allowed {
				return
			}
			if got := causeFields(resp); strings.Join(got, ",") != strings.Join(tt.causes, ",") {
				t.Errorf("causes = %q, want %q", got, tt.causes)
			}
			if !strings.Contains(resp.Result.Message, "only the lbregistrar controller ("+controllerUser+")") {
				t.Errorf("message %q does not name the controller", resp.Result.Message)
			}
			after := failureCount(t, "v1beta1", validation.RuleOwnershipRecord) + failureCount(t, "v1alpha1", validation.RuleOwnershipRecord)
			if after != before+1 {
				t.Errorf("refusals counted %v, want one more than %v", after, before)
			}
		})
	}
}

// ownershipDrop empties a status's ownership record.
func ownershipDrop(o *v1beta1.LBRegistrar) {
	o.Status.LoadBalancerID, o.Status.BackendSets, o.Status.RecordSignature = "", nil, ""
}

func failureCount(t *testing.T, labels ...string) float64 {
	t.Helper()
	var m dto.Metric
	if err := validationFailures.WithLabelValues(labels...).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

func TestRefusalsAreCountedPerRule(t *testing.T) {
	h := handlers(t)
	before := failureCount(t, "v1beta1", validation.RuleWeight)
	beforeFP := failureCount(t, "v1beta1", validation.RuleFingerprint)

	obj := hubObject("weights", testNLB, "a", "b")
	obj.Spec.Services[0].Weight, obj.Spec.Services[1].Weight = 0, 1000 // one rule broken twice
	if resp := send(t, h, ValidateV1beta1Path, review(t, admissionv1.Create, obj, nil)); resp.Allowed {
		t.Fatal("allowed")
	}
	if got := failureCount(t, "v1beta1", validation.RuleWeight) - before; got != 1 {
		t.Errorf("weight failures grew by %v, want 1", got)
	}
	if got := failureCount(t, "v1beta1", validation.RuleFingerprint) - beforeFP; got != 0 {
		t.Errorf("fingerprint failures grew by %v, want 0", got)
	}
}

// A literal AdmissionReview as the API server sends it, for a v1alpha1 object
// in the shape of the original operator's README.
const literalReview = `{
  "apiVersion": "admission.k8s.io/v1",
  "kind": "AdmissionReview",
  "request": {
    "uid": "0df28fbd-5f5f-4f61-b3b4-1d2b8bb2e3c1",
    "kind": {"group": "nodes.peppy-ratio.dev", "version": "v1alpha1", "kind": "LBRegistrar"},
    "resource": {"group": "nodes.peppy-ratio.dev", "version": "v1alpha1", "resource": "lbregistrars"},
    "requestKind": {"group": "nodes.peppy-ratio.dev", "version": "v1alpha1", "kind": "LBRegistrar"},
    "requestResource": {"group": "nodes.peppy-ratio.dev", "version": "v1alpha1", "resource": "lbregistrars"},
    "name": "lbregistrar-sample",
    "operation": "CREATE",
    "userInfo": {"username": "kubernetes-admin", "groups": ["system:masters", "system:authenticated"]},
    "object": {
      "apiVersion": "nodes.peppy-ratio.dev/v1alpha1",
      "kind": "LBRegistrar",
      "metadata": {"name": "lbregistrar-sample", "uid": "b6a4c1de-3f0e-4a7a-9a59-0d1c9c7d0f11", "creationTimestamp": null},
      "spec": {
        "loadBalancerId": "ocid1.loadbalancer.oc1.ap-tokyo-1.xxx",
        "nodePort": 30080,
        "weight": 1,
        "apiKey": {
          "user": "ocid1.user.oc1..xxx",
          "fingerprint": "xx:xx:xx",
          "tenancy": "ocid1.tenancy.oc1..xxx",
          "region": "ap-tokyo-1",
          "privateKey": {"namespace": "default", "secretKeyRef": {"name": "oci-api-key", "key": "private-key"}}
        }
      }
    },
    "oldObject": null,
    "dryRun": false,
    "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}
  }
}`

func TestLiteralAdmissionReview(t *testing.T) {
	resp := send(t, handlers(t), ValidateV1alpha1Path, []byte(literalReview))
	if resp.Allowed {
		t.Fatal("allowed a resource without backend set and with a bad fingerprint")
	}
	if got, want := strings.Join(causeFields(resp), ","), "spec.apiKey.fingerprint,spec.backendSetName"; got != want {
		t.Errorf("causes = %s, want %s", got, want)
	}
	if len(resp.Warnings) != 1 || !strings.Contains(resp.Warnings[0], "spec.nodePort is deprecated") {
		t.Errorf("warnings = %q", resp.Warnings)
	}
}

func TestMalformedReviewIsABadRequest(t *testing.T) {
	h := handlers(t)
	for name, body := range map[string]string{
		"not JSON":      "{",
		"no request":    `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`,
		"object broken": strings.Replace(literalReview, `"nodePort": 30080`, `"nodePort": "many"`, 1),
		"other version": string(review(t, admissionv1.Create, hubObject("a", testNLB, "x"), nil)),
		"no operation":  strings.Replace(literalReview, `"operation": "CREATE",`, ``, 1),
	} {
		t.Run(name, func(t *testing.T) {
			resp := admissionResponse(t, post(h, ValidateV1alpha1Path, []byte(body)))
			if resp.Allowed || resp.Result.Code != http.StatusBadRequest {
				t.Errorf("response = %+v, want a refusal with code 400", resp)
			}
		})
	}
}

// FuzzAdmission sends arbitrary bodies through the HTTP handlers: whatever
// arrives, the answer is an AdmissionReview, never a panic.
func FuzzAdmission(f *testing.F) {
	f.Add([]byte(literalReview), false)
	f.Add(review(f, admissionv1.Create, hubObject("a", testNLB, "ingress", "x"), nil), true)
	f.Add(review(f, admissionv1.Update, hubObject("a", testLB, "ingress"), hubObject("a", testNLB, "ingress")), true)
	f.Add(review(f, admissionv1.Create, alphaObject("a", "ingress"), nil), false)
	f.Add([]byte(`{"request":{"operation":"UPDATE","object":{"spec":{"services":[{}]}},"oldObject":{}}}`), false)
	h := handlers(f, hubObject("owner", testNLB, "ingress"))
	f.Fuzz(func(t *testing.T, body []byte, hub bool) {
		path := ValidateV1alpha1Path
		if hub {
			path = ValidateV1beta1Path
		}
		admissionResponse(t, post(h, path, body))
	})
}

// Naming an API key Secret is allowed to those who may get it, within the
// namespaces lbregistrar reads keys from; a write that leaves the spec alone
// is not asked.
func TestSecretAccess(t *testing.T) {
	h := handlersWith(t, IdentityPolicy{
		Namespaces: []string{"lbregistrar-system"},
		Reviewer:   secretReaders(map[string][]string{"alice": {"lbregistrar-system/oci-api-key"}}),
	})
	owned := hubObject("owned", testNLB, "ingress")
	labelled := owned.DeepCopy()
	labelled.Labels = map[string]string{"team": "a"}
	reweighted := owned.DeepCopy()
	reweighted.Spec.Services[0].Weight = 5
	paused := owned.DeepCopy()
	paused.Spec.Suspend, paused.Spec.DeletionPolicy = true, v1beta1.DeletionPolicyOrphan
	pausedAndReweighted := reweighted.DeepCopy()
	pausedAndReweighted.Spec.Suspend = true
	elsewhere := hubObject("elsewhere", testNLB, "ingress")
	elsewhere.Spec.APIKey.Passphrase = &v1beta1.SecretKeySource{Namespace: "kube-system", SecretKeyRef: v1beta1.SecretKeyRef{Name: "other", Key: "passphrase"}}

	tests := []struct {
		name, path string
		body       []byte
		causes     []string
		inMessage  string
	}{
		{name: "reader creates", path: ValidateV1beta1Path,
			body: reviewBy(t, "alice", admissionv1.Create, owned, nil)},
		{name: "non-reader creates", path: ValidateV1beta1Path,
			body:   reviewBy(t, "mallory", admissionv1.Create, owned, nil),
			causes: []string{"spec.apiKey.privateKey"}, inMessage: "mallory may not get Secret lbregistrar-system/oci-api-key"},
		{name: "non-reader creates through v1alpha1", path: ValidateV1alpha1Path,
			body:   reviewBy(t, "mallory", admissionv1.Create, alphaObject("alpha", "ingress"), nil),
			causes: []string{"spec.service.name", "spec.apiKey.privateKey"}, inMessage: "mallory may not get Secret"},
		{name: "non-reader labels", path: ValidateV1beta1Path,
			body: reviewBy(t, "mallory", admissionv1.Update, labelled, owned)},
		{name: "non-reader edits the spec", path: ValidateV1beta1Path,
			body:   reviewBy(t, "mallory", admissionv1.Update, reweighted, owned),
			causes: []string{"spec.apiKey.privateKey"}, inMessage: "mallory may not get"},
		// Pausing takes no more than deleting: suspend and deletionPolicy
		// name nothing to sign in with.
		{name: "non-reader pauses, and keeps the backends on deletion", path: ValidateV1beta1Path,
			body: reviewBy(t, "mallory", admissionv1.Update, paused, owned)},
		{name: "non-reader resumes", path: ValidateV1beta1Path,
			body: reviewBy(t, "mallory", admissionv1.Update, owned, paused)},
		{name: "non-reader pauses and edits the spec", path: ValidateV1beta1Path,
			body:   reviewBy(t, "mallory", admissionv1.Update, pausedAndReweighted, owned),
			causes: []string{"spec.apiKey.privateKey"}, inMessage: "mallory may not get"},
		{name: "outside the namespaces, whoever writes", path: ValidateV1beta1Path,
			body:   reviewBy(t, "alice", admissionv1.Create, elsewhere, nil),
			causes: []string{"spec.apiKey.passphrase"}, inMessage: "outside the namespaces lbregistrar reads API keys from (lbregistrar-system)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkRefusal(t, send(t, h, tt.path, tt.body), tt.causes, tt.inMessage)
		})
	}
}

// Naming a Service takes the right to update it, asked on create and for
// each Service an update newly names, on the field the version wrote it in.
func TestServiceAccess(t *testing.T) {
	h := handlersWith(t, IdentityPolicy{Reviewer: grantedRights(map[string][]string{
		"alice":   {"get secrets lbregistrar-system/oci-api-key", "update services shop/web"},
		"mallory": {"get secrets lbregistrar-system/oci-api-key", "update services istio-system/istio-ingressgateway"},
	})})
	http := intstr.FromString("http")
	webTarget := func(set string, pods bool) v1beta1.Target {
		t := v1beta1.Target{Namespace: "shop", Name: "web", Port: &http, BackendSetName: set, Weight: 1}
		if pods {
			t.TargetType = v1beta1.TargetTypePod
		}
		return t
	}
	shops := hubObject("shops", testNLB)
	shops.Spec.Services = []v1beta1.Target{webTarget("web", true), webTarget("web-nodes", false)}
	fixed := hubObject("fixed", testNLB, "fixed")
	moreOfWeb := shops.DeepCopy()
	moreOfWeb.Spec.Services[1].Weight = 5
	addsWeb := fixed.DeepCopy()
	addsWeb.Spec.Services = append(addsWeb.Spec.Services, webTarget("web", true))

	const refusal = "mallory may not update Service shop/web"
	for _, tt := range []struct {
		name, path string
		body       []byte
		causes     []string
	}{
		{"the Service's editor names it", ValidateV1beta1Path, reviewBy(t, "alice", admissionv1.Create, shops, nil), nil},
		{"another team names it, for its pods and its nodes", ValidateV1beta1Path, reviewBy(t, "mallory", admissionv1.Create, shops, nil), []string{"spec.services[0].name"}},
		{"a fixed node port names no Service", ValidateV1beta1Path, reviewBy(t, "mallory", admissionv1.Create, fixed, nil), nil},
		{"an update naming it anew", ValidateV1beta1Path, reviewBy(t, "mallory", admissionv1.Update, addsWeb, fixed), []string{"spec.services[1].name"}},
		{"an update of what it already names", ValidateV1beta1Path, reviewBy(t, "mallory", admissionv1.Update, moreOfWeb, shops), nil},
		{"v1alpha1, on its own field", ValidateV1alpha1Path, reviewBy(t, "alice", admissionv1.Create, alphaObject("alpha", "other"), nil), []string{"spec.service.name"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp := send(t, h, tt.path, tt.body)
			checkRefusal(t, resp, tt.causes, "may not update Service")
			if tt.causes != nil && tt.path == ValidateV1beta1Path && !strings.Contains(resp.Result.Message, refusal) {
				t.Errorf("message %q does not say %q", resp.Result.Message, refusal)
			}
		})
	}
}

// checkRefusal checks that resp refuses with causes (allows when none) and
// a message containing inMessage.
func checkRefusal(t *testing.T, resp *admissionv1.AdmissionResponse, causes []string, inMessage string) {
	t.Helper()
	if resp.Allowed != (causes == nil) {
		t.Fatalf("allowed = %v: %+v", resp.Allowed, resp.Result)
	}
	if got := causeFields(resp); strings.Join(got, ",") != strings.Join(causes, ",") {
		t.Errorf("causes = %q, want %q", got, causes)
	}
	if !resp.Allowed && !strings.Contains(resp.Result.Message, inMessage) {
		t.Errorf("message %q does not contain %q", resp.Result.Message, inMessage)
	}
}

// A workload identity's ServiceAccount may be named by those who may create
// tokens for it; the controller's own identity by no one unless serve
// allows it, and then by those granted use on it.
func TestKeylessIdentityAccess(t *testing.T) {
	rights := grantedRights(map[string][]string{"alice": {
		"create serviceaccounts/token team-a/lb-writer",
		"use identities controller",
	}})
	keyless := func(name string, set func(*v1beta1.LBRegistrarSpec)) *v1beta1.LBRegistrar {
		obj := hubObject(name, testNLB, name)
		obj.Spec.APIKey = nil
		set(&obj.Spec)
		return obj
	}
	ofServiceAccount := keyless("sa", func(s *v1beta1.LBRegistrarSpec) {
		s.WorkloadIdentity = &v1beta1.WorkloadIdentity{Region: "ap-tokyo-1", ServiceAccount: &v1beta1.ServiceAccountReference{Namespace: "team-a", Name: "lb-writer"}}
	})
	ofController := keyless("controller", func(s *v1beta1.LBRegistrarSpec) {
		s.WorkloadIdentity = &v1beta1.WorkloadIdentity{Region: "ap-tokyo-1"}
	})
	ofInstance := keyless("instance", func(s *v1beta1.LBRegistrarSpec) {
		s.InstancePrincipal = &v1beta1.InstancePrincipal{Region: "ap-tokyo-1"}
	})
	ofControllerNamed := keyless("controller-named", func(s *v1beta1.LBRegistrarSpec) {
		s.WorkloadIdentity = &v1beta1.WorkloadIdentity{Region: "ap-tokyo-1", ServiceAccount: &v1beta1.ServiceAccountReference{Namespace: "lbregistrar-system", Name: "lbregistrar"}}
	})
	closed := handlersWith(t, IdentityPolicy{Reviewer: rights})
	elsewhere := handlersWith(t, IdentityPolicy{Reviewer: rights, Namespaces: []string{"lbregistrar-system"}})
	open := handlersWith(t, IdentityPolicy{Reviewer: rights, AllowControllerIdentity: true})

	tests := []struct {
		name      string
		h         http.Handler
		body      []byte
		causes    []string
		inMessage string
	}{
		{name: "token creator names the service account", h: closed,
			body: reviewBy(t, "alice", admissionv1.Create, ofServiceAccount, nil)},
		{name: "others may not", h: closed,
			body:   reviewBy(t, "mallory", admissionv1.Create, ofServiceAccount, nil),
			causes: []string{"spec.workloadIdentity.serviceAccount"}, inMessage: "mallory may not create tokens for ServiceAccount team-a/lb-writer"},
		{name: "outside the namespaces, whoever writes", h: elsewhere,
			body:   reviewBy(t, "alice", admissionv1.Create, ofServiceAccount, nil),
			causes: []string{"spec.workloadIdentity.serviceAccount"}, inMessage: "ServiceAccount team-a/lb-writer is outside the namespaces lbregistrar signs in from (lbregistrar-system)"},
		{name: "the controller's workload identity, not allowed", h: closed,
			body:   reviewBy(t, "alice", admissionv1.Create, ofController, nil),
			causes: []string{"spec.workloadIdentity"}, inMessage: "does not let resources sign in as the controller itself (--allow-controller-identity)"},
		{name: "the instance principal, not allowed", h: closed,
			body:   reviewBy(t, "alice", admissionv1.Create, ofInstance, nil),
			causes: []string{"spec.instancePrincipal"}, inMessage: "does not let resources sign in as the controller itself"},
		{name: "allowed, by a writer who may use it", h: open,
			body: reviewBy(t, "alice", admissionv1.Create, ofController, nil)},
		{name: "allowed, instance principal by a writer who may use it", h: open,
			body: reviewBy(t, "alice", admissionv1.Create, ofInstance, nil)},
		{name: "allowed, by a writer who may not", h: open,
			body:   reviewBy(t, "mallory", admissionv1.Create, ofInstance, nil),
			causes: []string{"spec.instancePrincipal"}, inMessage: "mallory may not sign in as the lbregistrar controller: that takes use on identities.nodes.peppy-ratio.dev named controller"},
		// The controller's ServiceAccount named is the controller's identity.
		{name: "the controller's ServiceAccount named, not allowed", h: closed,
			body:   reviewBy(t, "alice", admissionv1.Create, ofControllerNamed, nil),
			causes: []string{"spec.workloadIdentity.serviceAccount"}, inMessage: "does not let resources sign in as the controller itself"},
		{name: "the controller's ServiceAccount named, allowed, by a writer who may use it", h: open,
			body: reviewBy(t, "alice", admissionv1.Create, ofControllerNamed, nil)},
		{name: "the controller's ServiceAccount named, allowed, by a writer who may not", h: open,
			body:   reviewBy(t, "mallory", admissionv1.Create, ofControllerNamed, nil),
			causes: []string{"spec.workloadIdentity.serviceAccount"}, inMessage: "mallory may not sign in as the lbregistrar controller"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkRefusal(t, send(t, tt.h, ValidateV1beta1Path, tt.body), tt.causes, tt.inMessage)
		})
	}
}

// Removing the mark of an identity no admission check saw makes the
// controller use it: the write is checked as one naming it, though it
// leaves the spec alone. A write that keeps the mark is not asked.
func TestUncheckedIdentityMark(t *testing.T) {
	h := handlersWith(t, IdentityPolicy{Reviewer: grantedRights(map[string][]string{"alice": {"create serviceaccounts/token team-a/lb-writer"}})})
	unmarked := hubObject("planted", testNLB, "ingress")
	unmarked.Spec.APIKey = nil
	unmarked.Spec.WorkloadIdentity = &v1beta1.WorkloadIdentity{Region: "ap-tokyo-1", ServiceAccount: &v1beta1.ServiceAccountReference{Namespace: "team-a", Name: "lb-writer"}}
	marked := unmarked.DeepCopy()
	marked.Annotations = map[string]string{v1alpha1.UncheckedIdentityAnnotation: unmarked.Spec.Identity()}
	labelled := marked.DeepCopy()
	labelled.Labels = map[string]string{"team": "a"}
	tests := []struct {
		name      string
		body      []byte
		causes    []string
		inMessage string
	}{
		{name: "removed by one who may not use it",
			body:   reviewBy(t, "mallory", admissionv1.Update, unmarked, marked),
			causes: []string{"spec.workloadIdentity.serviceAccount"}, inMessage: "mallory may not create tokens for ServiceAccount team-a/lb-writer"},
		{name: "removed by one who may",
			body: reviewBy(t, "alice", admissionv1.Update, unmarked, marked)},
		{name: "kept",
			body: reviewBy(t, "mallory", admissionv1.Update, labelled, marked)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkRefusal(t, send(t, h, ValidateV1beta1Path, tt.body), tt.causes, tt.inMessage)
		})
	}
}

// Naming a resource in the replaces annotation, which hands its backend
// sets to the writer's, takes the right to update it: on create, and when a
// write adds the name, though it leaves the spec alone. Names already there
// are not asked again, and dropping one needs nothing.
func TestReplacesAccess(t *testing.T) {
	key := "lbregistrar-system/oci-api-key"
	h := handlersWith(t, IdentityPolicy{Reviewer: grantedRights(map[string][]string{
		"alice":   {"get secrets " + key, "update lbregistrars team-a"},
		"mallory": {"get secrets " + key},
	})})
	replacing := func(names string) *v1beta1.LBRegistrar {
		obj := hubObject("mine", testNLB, "ingress")
		if names != "" {
			obj.Annotations = map[string]string{validation.ReplacesAnnotation: names}
		}
		return obj
	}
	const refusal = "mallory may not update LBRegistrar team-a: a resource that replaces another takes over its backend sets"
	tests := []struct {
		name      string
		body      []byte
		causes    []string
		inMessage string
	}{
		{name: "created naming it by one who may update it",
			body: reviewBy(t, "alice", admissionv1.Create, replacing("team-a"), nil)},
		{name: "created naming it by one who may not",
			body:   reviewBy(t, "mallory", admissionv1.Create, replacing("old, team-a"), nil),
			causes: []string{"metadata.annotations[nodes.peppy-ratio.dev/replaces]", "metadata.annotations[nodes.peppy-ratio.dev/replaces]"}, inMessage: refusal},
		{name: "named later, the spec unchanged",
			body:   reviewBy(t, "mallory", admissionv1.Update, replacing("team-a"), replacing("")),
			causes: []string{"metadata.annotations[nodes.peppy-ratio.dev/replaces]"}, inMessage: refusal},
		{name: "another name added beside it",
			body:   reviewBy(t, "mallory", admissionv1.Update, replacing("team-a,team-b"), replacing("team-a")),
			causes: []string{"metadata.annotations[nodes.peppy-ratio.dev/replaces]"}, inMessage: "mallory may not update LBRegistrar team-b"},
		{name: "named before, kept",
			body: reviewBy(t, "mallory", admissionv1.Update, replacing("team-a"), replacing("team-a"))},
		{name: "dropped",
			body: reviewBy(t, "mallory", admissionv1.Update, replacing(""), replacing("team-a"))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkRefusal(t, send(t, h, ValidateV1beta1Path, tt.body), tt.causes, tt.inMessage)
		})
	}
}

// A grant is remembered for the cache's time to live, per writer (groups
// included) and Secret; a refusal is asked again every time, so a right
// just granted counts at once.
func TestIdentityPolicyRemembersGrants(t *testing.T) {
	readers := map[string][]string{"alice": {"lbregistrar-system/oci-api-key"}}
	var asked int
	reviewer := fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			asked++
			return secretReaders(readers).Create(ctx, obj, opts...)
		},
	}).Build()
	now := time.Unix(0, 0)
	grants := NewGrantCache(time.Minute)
	grants.now = func() time.Time { return now }
	p := IdentityPolicy{Reviewer: reviewer, Grants: grants}
	rights, _ := p.rightsFor(&hubObject("a", testNLB, "ingress").Spec)

	check := func(user authenticationv1.UserInfo, wantAllowed bool, wantAsked int) {
		t.Helper()
		asked = 0
		errs, err := p.check(context.Background(), user, rights)
		if err != nil {
			t.Fatal(err)
		}
		if allowed := len(errs) == 0; allowed != wantAllowed || asked != wantAsked {
			t.Errorf("%s: allowed %v after %d reviews, want %v after %d", user.Username, allowed, asked, wantAllowed, wantAsked)
		}
	}
	alice := authenticationv1.UserInfo{Username: "alice"}
	check(alice, true, 1)
	check(alice, true, 0)
	check(authenticationv1.UserInfo{Username: "alice", Groups: []string{"other"}}, true, 1)

	mallory := authenticationv1.UserInfo{Username: "mallory"}
	check(mallory, false, 1)
	readers["mallory"] = readers["alice"]
	check(mallory, true, 1)

	now = now.Add(time.Minute)
	delete(readers, "alice")
	check(alice, false, 1)
}
