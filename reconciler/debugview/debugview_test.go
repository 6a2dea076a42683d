package debugview_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/reconciler/debugview"
	"github.com/peppy-ratio/lbregistrar/reconciler/lanes"
	"github.com/peppy-ratio/lbregistrar/reconciler/plan"
	"github.com/peppy-ratio/lbregistrar/reconciler/preview"
)

func TestView(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 1, 0, 0, 0, time.UTC)
	l := lanes.New()
	elected := make(chan struct{})
	close(elected)
	var drains debugview.Drains
	h := debugview.Handler(debugview.Sources{Lanes: l, Drains: &drains, Elected: elected})

	busy, _ := l.TryAcquire("lb-b", "first", nil)
	busy.Step(lanes.Waiting, "api", "wr-1")
	l.TryAcquire("lb-b", "parked", func() {})
	got := serve(t, h)
	if diff := cmp.Diff(l.Snapshot(), got.LoadBalancers); diff != "" || !got.Leader || got.NodeDrains == nil || got.DryRun {
		t.Fatalf("view %+v; lanes (-want +got):\n%s", got, diff)
	}
	busy.Release()

	// Drains are listed the first to end first, until their resource is gone.
	drained := func(ip string, since time.Time) *plan.Plan {
		return &plan.Plan{Draining: []v1beta1.DrainingBackend{{IP: ip, Port: 30080, Since: metav1.NewTime(since)}}}
	}
	drains.Set("r1", "lb-a", "api", drained("10.0.0.2", t0.Add(time.Second)), time.Minute)
	drains.Set("r2", "lb-a", "web", drained("10.0.0.1", t0), time.Minute)
	drains.Set("r2", "lb-a", "gone", drained("10.0.0.3", t0), time.Minute)
	drains.Set("r2", "lb-a", "gone", nil, 0)
	wantDrains := []debugview.NodeDrain{{"r2", "lb-a", "web", "10.0.0.1:30080", t0.Add(time.Minute)}, {"r1", "lb-a", "api", "10.0.0.2:30080", t0.Add(time.Minute + time.Second)}}
	if diff := cmp.Diff(wantDrains, serve(t, h).NodeDrains); diff != "" {
		t.Errorf("drains (-want +got):\n%s", diff)
	}
	drains.Forget("r2")
	if diff := cmp.Diff(wantDrains[1:], serve(t, h).NodeDrains); diff != "" {
		t.Errorf("drains after r2 is gone (-want +got):\n%s", diff)
	}
}

// A dry-running controller lists the writes it kept back.
func TestViewUnderDryRun(t *testing.T) {
	h := debugview.Handler(debugview.Sources{Lanes: lanes.New(), Drains: &debugview.Drains{}, Pending: preview.NewPending(), Elected: make(chan struct{})})
	if got := serve(t, h); !got.DryRun || got.Leader {
		t.Errorf("view %+v, want a dry run, not leading", got)
	}
}

func serve(t *testing.T, h http.Handler) debugview.View {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", debugview.Path, nil))
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q", ct)
	}
	var v debugview.View
	if err := json.Unmarshal(rec.Body.Bytes(), &v); err != nil {
		t.Fatalf("%v: %s", err, rec.Body)
	}
	return v
}
