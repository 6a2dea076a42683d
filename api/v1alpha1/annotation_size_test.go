package v1alpha1

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	goruntime "runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
)

// recordedHub is a v1beta1 resource whose status records every one of
// nodes addresses, scattered over a /16 as a large cluster's are, in each of
// sets backend sets.
func recordedHub(sets, nodes int) *v1beta1.LBRegistrar {
	r := rand.New(rand.NewPCG(1, 2))
	var owned []v1beta1.Backend
	seen := map[string]bool{}
	for len(owned) < nodes {
		ip := fmt.Sprintf("10.0.%d.%d", r.IntN(256), 1+r.IntN(254))
		if !seen[ip] {
			seen[ip] = true
			owned = append(owned, v1beta1.Backend{IP: ip, Weight: 1})
		}
	}
	hub := &v1beta1.LBRegistrar{}
	ToHub(seedSingleService(), hub)
	for s := range sets {
		for i := range owned {
			owned[i].Port = int32(30000 + s)
		}
		rec := v1beta1.BackendSetStatus{Name: fmt.Sprintf("set-%d", s)}
		rec.SetOwned(owned)
		hub.Status.BackendSets = append(hub.Status.BackendSets, rec)
	}
	hub.Status.Conditions = []metav1.Condition{{Type: v1beta1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1beta1.ReasonRegistered}}
	return hub
}

// At 5,000 nodes the status v1alpha1 keeps in its annotation is compressed,
// so that the API server, which limits all annotations to 256 KiB, can
// return a resource of many backend sets as v1alpha1; it reads back exact.
func TestLargeStatusFitsTheAnnotationLimit(t *testing.T) {
	for _, sets := range []int{1, 4, 10} {
		t.Run(fmt.Sprintf("%d-backend-sets", sets), func(t *testing.T) {
			hub := recordedHub(sets, 5000)
			var spoke LBRegistrar
			FromHub(hub, &spoke)
			value := spoke.Annotations[HubDataAnnotation]
			if !strings.HasPrefix(value, compressedPrefix) {
				t.Errorf("an annotation of %d bytes is not compressed", len(value))
			}
			if errs := apivalidation.ValidateAnnotations(spoke.Annotations, field.NewPath("metadata", "annotations")); len(errs) > 0 {
				t.Fatalf("the API server would refuse the v1alpha1 form: %v", errs.ToAggregate())
			}
			t.Logf("%d backend sets of 5,000 addresses: annotation of %d bytes", sets, len(value))
			var again LBRegistrar
			FromHub(hub, &again)
			if again.Annotations[HubDataAnnotation] != value {
				t.Error("the same status gave another annotation text")
			}
			var back v1beta1.LBRegistrar
			ToHub(&spoke, &back)
			if diff := cmp.Diff(hub.Status, back.Status); diff != "" {
				t.Errorf("status read back (-hub +back):\n%s", diff)
			}
		})
	}
}

// A small annotation stays plain JSON, readable as people see it.
func TestSmallAnnotationIsPlainJSON(t *testing.T) {
	hub := recordedHub(1, 3)
	var spoke LBRegistrar
	FromHub(hub, &spoke)
	if value := spoke.Annotations[HubDataAnnotation]; !strings.HasPrefix(value, "{") {
		t.Errorf("annotation %q", value)
	}
}

// A compressed value that is not one conversion wrote (forged, broken, or
// expanding past any object's size) is unreadable, as unreadable JSON is:
// conversion goes on without it, and does not spend memory on it.
func TestUnreadableCompressedAnnotationsAreIgnored(t *testing.T) {
	bomb := func() string {
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		_, _ = zw.Write([]byte(`{"status":{"backendSets":[{"name":"` + strings.Repeat("a", maxAnnotationJSON) + `"}]}}`))
		_ = zw.Close()
		return compressedPrefix + base64.StdEncoding.EncodeToString(buf.Bytes())
	}()
	for name, value := range map[string]string{
		"not base64":           compressedPrefix + "%%%",
		"not gzip":             compressedPrefix + base64.StdEncoding.EncodeToString([]byte("plain")),
		"expands past a limit": bomb,
	} {
		t.Run(name, func(t *testing.T) {
			spoke := seedSingleService()
			spoke.Status.Phase = PhaseReady
			spoke.Annotations = map[string]string{HubDataAnnotation: value}
			var hub v1beta1.LBRegistrar
			ToHub(spoke, &hub)
			if len(hub.Status.BackendSets) != 0 || len(hub.Spec.Services) != 1 {
				t.Errorf("converted with the unreadable annotation: %+v", hub.Status)
			}
		})
	}
}

// gzipped is value compressed as conversion writes it, with the size its
// trailer declares replaced by declared when that is not negative.
func gzipped(value []byte, declared int64) string {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	_, _ = zw.Write(value)
	_ = zw.Close()
	packed := buf.Bytes()
	if declared >= 0 {
		binary.LittleEndian.PutUint32(packed[len(packed)-4:], uint32(declared))
	}
	return compressedPrefix + base64.StdEncoding.EncodeToString(packed)
}

// What a compressed value costs to read is known before it is read: the size
// its gzip trailer declares. A value declaring more than any object can
// contain is not expanded at all, and one that expands past what it declares
// (a forged trailer, or a size past 4 GiB, which the trailer keeps modulo
// 4 GiB) is unreadable after at most its declared size: expansion never
// exceeds the declaration.
func TestCompressedAnnotationCostsWhatItDeclares(t *testing.T) {
	zeros := make([]byte, 64<<20)
	hub := recordedHub(3, 5000)
	var spoke LBRegistrar
	FromHub(hub, &spoke)
	honest := spoke.Annotations[HubDataAnnotation]
	for name, tc := range map[string]struct {
		value    string
		expanded int64 // ExpandedSize
		readable bool
		alloc    uint64 // at most, reading it
	}{
		"written by conversion":    {honest, int64(len(mustJSON(t, hubData{Status: &hub.Status}))), true, 8 << 20},
		"plain JSON":               {`{"status":{}}`, 0, true, 1 << 20},
		"declares too much":        {gzipped(zeros, -1), 0, false, 1 << 20},
		"declares less than it is": {gzipped(zeros, 1<<10), 1 << 10, false, 1 << 20},
		"not base64 at its end":    {compressedPrefix + "H4sI%%%%", 0, false, 1 << 20},
		"too short":                {compressedPrefix + "H4sI", 0, false, 1 << 20},
	} {
		t.Run(name, func(t *testing.T) {
			annotations := map[string]string{HubDataAnnotation: tc.value}
			if got := ExpandedSize(annotations, HubDataAnnotation); got != tc.expanded {
				t.Errorf("ExpandedSize = %d, want %d", got, tc.expanded)
			}
			var before, after goruntime.MemStats
			goruntime.ReadMemStats(&before)
			got := decodeAnnotation[hubData](annotations, HubDataAnnotation)
			goruntime.ReadMemStats(&after)
			if (got != nil) != tc.readable {
				t.Errorf("readable = %t, want %t", got != nil, tc.readable)
			}
			if allocated := after.TotalAlloc - before.TotalAlloc; allocated > tc.alloc {
				t.Errorf("reading it allocated %d bytes, want at most %d", allocated, tc.alloc)
			}
		})
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
