package reconciler

import (
	"encoding/json"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/reconciler/lanes"
	"github.com/peppy-ratio/lbregistrar/reconciler/plan"
	"github.com/peppy-ratio/lbregistrar/reconciler/preview"
)

func TestLanesView(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 1, 0, 0, 0, time.UTC)
	l := lanes.New()
	elected := make(chan struct{})
	close(elected)
	r := &Reconciler{lanes: l, elected: elected, pending: preview.NewPending()}

	busy, _ := l.TryAcquire("lb-b", "holder", nil)
	busy.Step(lanes.Waiting, "api", "wr-1")
	l.TryAcquire("lb-b", "parked", func() {})
	got := serve(t, r)
	if diff := cmp.Diff(l.Snapshot(), got.LoadBalancers); diff != "" || !got.Leader || got.NodeDrains == nil {
		t.Fatalf("view %+v; lanes (-want +got):\n%s", got, diff)
	}
	busy.Release()

	// Drains are listed the first to end first, until their resource is gone.
	drained := func(ip string, since time.Time) *plan.Plan {
		return &plan.Plan{Draining: []v1beta1.DrainingBackend{{IP: ip, Port: 30080, Since: metav1.NewTime(since)}}}
	}
	r.drains.set("r1", "lb-a", "api", drained("10.0.0.2", t0.Add(time.Second)), time.Minute)
	r.drains.set("r2", "lb-a", "web", drained("10.0.0.1", t0), time.Minute)
	r.drains.set("r2", "lb-a", "gone", drained("10.0.0.3", t0), time.Minute)
	r.drains.set("r2", "lb-a", "gone", nil, 0)
	wantDrains := []NodeDrain{{"r2", "lb-a", "web", "10.0.0.1:30080", t0.Add(time.Minute)}, {"r1", "lb-a", "api", "10.0.0.2:30080", t0.Add(time.Minute + time.Second)}}
	if diff := cmp.Diff(wantDrains, serve(t, r).NodeDrains); diff != "" {
		t.Errorf("drains (-want +got):\n%s", diff)
	}
	r.drains.Forget("r2")
	if diff := cmp.Diff(wantDrains[1:], serve(t, r).NodeDrains); diff != "" {
		t.Errorf("drains after r2 is gone (-want +got):\n%s", diff)
	}
}

func serve(t *testing.T, r *Reconciler) LanesView {
	t.Helper()
	rec := httptest.NewRecorder()
	r.serveLanes(rec, httptest.NewRequest("GET", DebugLanesPath, nil))
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q", ct)
	}
	var v LanesView
	if err := json.Unmarshal(rec.Body.Bytes(), &v); err != nil {
		t.Fatalf("%v: %s", err, rec.Body)
	}
	return v
}
