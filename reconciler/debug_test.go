package reconciler

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/reconciler/desired"
	"github.com/peppy-ratio/lbregistrar/reconciler/plan"
)

func TestLanesView(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 1, 0, 0, 0, time.UTC)
	now := t0
	l := newLanes()
	l.now = func() time.Time { return now }
	elected := make(chan struct{})
	close(elected)
	r := &Reconciler{lanes: l, elected: elected, pending: newPendingWrites()}

	busy, ok := l.tryAcquire("lb-b", "holder", nil)
	if !ok {
		t.Fatal("free lane not taken")
	}
	now = t0.Add(time.Second)
	busy.step(PhaseWaiting, "api", "wr-1")
	now = t0.Add(2 * time.Second)
	l.tryAcquire("lb-b", "second", func() {})
	now = t0.Add(3 * time.Second)
	l.tryAcquire("lb-b", "first", func() {})
	l.tryAcquire("lb-b", "second", func() {}) // parked again: still waiting since it first parked
	idle, _ := l.tryAcquire("lb-a", "alone", nil)
	now = t0.Add(4 * time.Second)

	want := LanesView{Time: now, Leader: true, LoadBalancers: []LaneStatus{
		{LoadBalancerID: "lb-a", Holder: "alone", HeldSince: t0.Add(3 * time.Second),
			Step: LaneStep{Phase: PhaseReading, Since: t0.Add(3 * time.Second)}, Parked: []ParkedResource{}},
		{LoadBalancerID: "lb-b", Holder: "holder", HeldSince: t0,
			Step:   LaneStep{Phase: PhaseWaiting, BackendSet: "api", WorkRequest: "wr-1", Since: t0.Add(time.Second)},
			Parked: []ParkedResource{{Name: "second", Since: t0.Add(2 * time.Second)}, {Name: "first", Since: t0.Add(3 * time.Second)}}},
	}, NodeDrains: []NodeDrain{}}
	if diff := cmp.Diff(want, serve(t, r)); diff != "" {
		t.Fatalf("view (-want +got):\n%s", diff)
	}

	idle.release()
	busy.release()
	got := serve(t, r)
	if got.LoadBalancers == nil || len(got.LoadBalancers) != 0 {
		t.Fatalf("after release: %+v, want an empty list", got.LoadBalancers)
	}

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
	r.drains.forget("r2")
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

// observingAPI records the lane while its work request runs.
type observingAPI struct {
	scriptedAPI
	lanes  *lanes
	during []LaneStatus
}

func (o *observingAPI) WaitWorkRequest(ctx context.Context, lb, id string) error {
	o.during = o.lanes.snapshot()
	return o.scriptedAPI.WaitWorkRequest(ctx, lb, id)
}

// A write reports its work request on the lane and logs its outcome with
// the load balancer, backend set, work request and duration.
func TestSyncReportsOnLaneAndLog(t *testing.T) {
	l := newLanes()
	turn, _ := l.tryAcquire("lb", "res", nil)
	defer turn.release()
	ociClient := &observingAPI{lanes: l}
	var lines []map[string]any
	logger := funcr.NewJSON(func(obj string) {
		var m map[string]any
		if err := json.Unmarshal([]byte(obj), &m); err != nil {
			t.Errorf("log line %q: %v", obj, err)
		}
		lines = append(lines, m)
	}, funcr.Options{Verbosity: 1})
	ctx := log.IntoContext(context.Background(), logger)

	_, err := syncBackendSet(ctx, ociClient, Backoff{Base: time.Millisecond, Max: time.Millisecond, Attempts: 2}, syncRequest{
		LoadBalancerID: "lb", Name: "api", Turn: turn, WaitTimeout: time.Second,
		Input: func(cur []plan.Backend) plan.Input {
			return plan.Input{Current: cur, Desired: []desired.Backend{{IP: "10.0.0.1", Port: 30080, Weight: 1}}}
		},
		RecordIntent: func([]v1beta1.Backend) error { return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(ociClient.during) != 1 || ociClient.during[0].Step.Phase != PhaseWaiting || ociClient.during[0].Step.WorkRequest != "wr-1" ||
		ociClient.during[0].Step.BackendSet != "api" {
		t.Fatalf("lane during the work request: %+v", ociClient.during)
	}

	var done map[string]any
	for _, m := range lines {
		if m["loadBalancer"] != "lb" || m["backendSet"] != "api" {
			t.Errorf("log line without loadBalancer and backendSet: %v", m)
		}
		if strings.HasPrefix(m["msg"].(string), "backend set updated") {
			done = m
		}
	}
	if done == nil || done["workRequest"] != "wr-1" || done["duration"] == nil {
		t.Fatalf("no completion line with work request and duration in %v", lines)
	}
}
