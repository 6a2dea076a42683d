package conversion

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	goruntime "runtime"
	"strings"
	"testing"

	apix "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/peppy-ratio/lbregistrar/api/v1alpha1"
	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/test/forge"
)

// reviewBody is a ConversionReview to desired of count copies of obj.
func reviewBody(t testing.TB, desired string, obj any, count int) []byte {
	t.Helper()
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"kind":"ConversionReview","apiVersion":"apiextensions.k8s.io/v1","request":{"uid":"u-1","desiredAPIVersion":%q,"objects":[`, desired)
	for i := range count {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(raw)
	}
	b.WriteString("]}}")
	return b.Bytes()
}

// serve posts body to handler and returns the review it answers and the
// bytes allocated meanwhile.
func serve(t *testing.T, handler http.Handler, body []byte) (*apix.ConversionReview, uint64) {
	t.Helper()
	var before, after goruntime.MemStats
	goruntime.GC()
	goruntime.ReadMemStats(&before)
	rec := httptest.NewRecorder()
	handler.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, Path, bytes.NewReader(body)))
	goruntime.ReadMemStats(&after)
	var resp apix.ConversionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil || resp.Response == nil {
		t.Fatalf("response %d %.200q: %v", rec.Code, rec.Body.String(), err)
	}
	return &resp, after.TotalAlloc - before.TotalAlloc
}

// A review whose compressed annotations would expand past its budget is
// refused with an error that says why, before anything is expanded: a few
// hundred kB of crafted values that would expand to hundreds of MB cost
// about what they weigh.
func TestReviewExpansionIsBounded(t *testing.T) {
	bomb := seedSingleService(t)
	bomb.Annotations = map[string]string{v1alpha1.HubDataAnnotation: forge.HubData()}
	body := reviewBody(t, v1beta1.GroupVersion.String(), bomb, 100)

	resp, allocated := serve(t, newReviewHandler(t), body)
	if resp.Response.Result.Status != metav1.StatusFailure || !strings.Contains(resp.Response.Result.Message, "convert fewer objects at a time") {
		t.Errorf("a review of %d bytes expanding to 400 MiB: %+v", len(body), resp.Response.Result)
	}
	if limit := uint64(8 * len(body)); allocated > limit {
		t.Errorf("refusing a review of %d bytes allocated %d bytes, want at most %d", len(body), allocated, limit)
	}
}

// What the API server legitimately sends still converts: a list of
// resources whose recorded statuses are large, compressed as conversion
// writes them, expanding past the budget's base.
func TestLargeListConverts(t *testing.T) {
	hub := &v1beta1.LBRegistrar{}
	v1alpha1.ToHub(seedSingleService(t), hub)
	var addresses []string
	for i := range 5000 {
		addresses = append(addresses, fmt.Sprintf("10.%d.%d.%d", i>>16, i>>8&255, i&255))
	}
	for s := range 3 {
		hub.Status.BackendSets = append(hub.Status.BackendSets, v1beta1.BackendSetStatus{
			Name:     fmt.Sprintf("set-%d", s),
			Backends: []v1beta1.BackendGroup{{Port: int32(30000 + s), Weight: 1, Addresses: strings.Join(addresses, " ")}},
		})
	}
	hub.Status.Conditions = []metav1.Condition{{Type: v1beta1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1beta1.ReasonRegistered, LastTransitionTime: metav1.Now()}}
	var alpha v1alpha1.LBRegistrar
	v1alpha1.FromHub(hub, &alpha)
	count := int(reviewExpansionBase/v1alpha1.ExpandedSize(alpha.Annotations, v1alpha1.HubDataAnnotation)) + 10

	resp, _ := serve(t, newReviewHandler(t), reviewBody(t, v1beta1.GroupVersion.String(), &alpha, count))
	if resp.Response.Result.Status != metav1.StatusSuccess || len(resp.Response.ConvertedObjects) != count {
		t.Fatalf("%d objects converted: %+v", len(resp.Response.ConvertedObjects), resp.Response.Result)
	}
	var got v1beta1.LBRegistrar
	if err := json.Unmarshal(resp.Response.ConvertedObjects[count-1].Raw, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Status.BackendSets) != 3 || got.Status.BackendSets[2].Backends[0].Addresses != hub.Status.BackendSets[2].Backends[0].Addresses {
		t.Errorf("the recorded status did not convert back")
	}
}
