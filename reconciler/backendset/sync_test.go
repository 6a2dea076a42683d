package backendset

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/reconciler/backendset/backendsettest"
	"github.com/peppy-ratio/lbregistrar/reconciler/desired"
	"github.com/peppy-ratio/lbregistrar/reconciler/lanes"
	"github.com/peppy-ratio/lbregistrar/reconciler/oci"
	"github.com/peppy-ratio/lbregistrar/reconciler/plan"
)

func TestSyncBackendSetRetries(t *testing.T) {
	conflict := &oci.Error{Op: "UpdateBackendSet", Status: 409, Code: "Conflict", Class: "conflict", Err: errors.New("busy")}
	stale := &oci.Error{Op: "UpdateBackendSet", Status: 412, Code: "NoEtagMatch", Class: "precondition", Err: errors.New("etag")}
	denied := &oci.Error{Op: "UpdateBackendSet", Status: 401, Code: "NotAuthenticated", Err: errors.New("no")}
	failedWR := &oci.Error{Op: "WorkRequest", Code: "FAILED", Class: "workrequest", Err: errors.New("failed")}
	gone := &oci.Error{Op: "GetBackendSet", Status: 404, Code: "NotFound", Err: errors.New("gone")}
	want := []desired.Backend{{IP: "10.0.0.1", Port: 30080, Weight: 1}}

	tests := []struct {
		name       string
		ociClient  *backendsettest.API
		wantWrites int
		wantErr    error
		wantReads  int
	}{
		{"no change, no write", &backendsettest.API{Backends: []plan.Backend{{IP: "10.0.0.1", Port: 30080, Weight: 1}}}, 0, nil, 1},
		{"409 then ok", &backendsettest.API{WriteErrors: []error{conflict, conflict}}, 3, nil, 3},
		{"412 re-reads", &backendsettest.API{WriteErrors: []error{stale}}, 2, nil, 2},
		{"412 costs no attempt", &backendsettest.API{WriteErrors: []error{stale, stale, stale, conflict, stale}}, 6, nil, 6},
		{"412s past their own budget cost attempts", &backendsettest.API{WriteErrors: []error{stale, stale, stale, stale, stale, stale}}, 6, stale, 6},
		{"failed work request is retried", &backendsettest.API{WaitErrors: []error{failedWR}}, 2, nil, 2},
		{"401 is not retried", &backendsettest.API{WriteErrors: []error{denied}}, 1, denied, 1},
		{"attempts are bounded", &backendsettest.API{WriteErrors: []error{conflict, conflict, conflict, conflict}}, 3, conflict, 3},
		// Another writer's work request in flight is waited out, then the
		// write goes again: no attempt spent.
		{"409 behind another writer's work request costs no attempt", &backendsettest.API{WriteErrors: []error{conflict, conflict, conflict, conflict},
			InFlight: [][]string{{"theirs-1"}, {"theirs-2", "theirs-3"}, {"theirs-4"}, {"theirs-5"}}}, 5, nil, 5},
		{"waits for others are bounded too", &backendsettest.API{WriteErrors: []error{conflict, conflict, conflict, conflict, conflict, conflict, conflict},
			InFlight: [][]string{{"a"}, {"b"}, {"c"}, {"d"}, {"e"}, {"f"}, {"g"}}}, 6, conflict, 6},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var intents int
			res, err := Sync(context.Background(), tc.ociClient, Backoff{Base: time.Millisecond, Max: 2 * time.Millisecond, Attempts: 3}, Request{
				LoadBalancerID: "lb", Name: "bs",
				Input: func(cur []plan.Backend) plan.Input {
					return plan.Input{Current: cur, Desired: want}
				},
				RecordIntent: func([]v1beta1.Backend) error { intents++; return nil },
				WaitTimeout:  time.Second,
			})
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if tc.ociClient.Writes != tc.wantWrites || tc.ociClient.Reads != tc.wantReads {
				t.Errorf("writes, reads = %d, %d; want %d, %d", tc.ociClient.Writes, tc.ociClient.Reads, tc.wantWrites, tc.wantReads)
			}
			if tc.wantWrites > 0 && intents == 0 {
				t.Errorf("no intent recorded before adding backends")
			}
			if err == nil && tc.wantWrites > 0 && (!res.Written || res.WorkRequest.Status != "SUCCEEDED") {
				t.Errorf("result = %+v", res)
			}
		})
	}

	// The prefetched read decides whether to write; the write itself always
	// follows a read of its own, as a classic load balancer's ETag moves
	// with every write to any of its backend sets.
	for _, tc := range []struct {
		name              string
		prefetched        []plan.Backend
		wantReads, writes int
	}{
		{"prefetched and unchanged: no read, no write", []plan.Backend{{IP: "10.0.0.1", Port: 30080, Weight: 1}}, 0, 0},
		{"prefetched and changed: read again, then written", nil, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ociClient := &backendsettest.API{}
			_, err := Sync(context.Background(), ociClient, Backoff{Base: time.Millisecond, Max: time.Millisecond, Attempts: 3}, Request{
				LoadBalancerID: "lb", Name: "bs",
				Prefetched:   &oci.BackendSet{LoadBalancerID: "lb", Name: "bs", Backends: tc.prefetched, ETag: "read-before-another-set-was-written"},
				Input:        func(cur []plan.Backend) plan.Input { return plan.Input{Current: cur, Desired: want} },
				RecordIntent: func([]v1beta1.Backend) error { return nil },
				WaitTimeout:  time.Second,
			})
			if err != nil || ociClient.Reads != tc.wantReads || ociClient.Writes != tc.writes {
				t.Fatalf("err %v, reads %d, writes %d; want reads %d, writes %d", err, ociClient.Reads, ociClient.Writes, tc.wantReads, tc.writes)
			}
		})
	}

	// A write tried again after its work request failed names that work
	// request, so it gets a retry token of its own instead of the failure
	// replayed; the first write names the failure the record kept.
	t.Run("failed work request", func(t *testing.T) {
		ociClient := &backendsettest.API{WaitErrors: []error{failedWR, failedWR}}
		_, err := Sync(context.Background(), ociClient, Backoff{Base: time.Millisecond, Max: time.Millisecond, Attempts: 3}, Request{
			LoadBalancerID: "lb", Name: "bs", Last: &v1beta1.WorkRequest{ID: "wr-recorded", Status: "FAILED"},
			Input:        func(cur []plan.Backend) plan.Input { return plan.Input{Current: cur, Desired: want} },
			RecordIntent: func([]v1beta1.Backend) error { return nil },
			WaitTimeout:  time.Second,
		})
		if want := []string{"wr-recorded", "wr-1", "wr-2"}; err != nil || !slices.Equal(ociClient.Failed, want) {
			t.Fatalf("err %v; writes named %q as failed before them, want %q", err, ociClient.Failed, want)
		}
	})

	// A wait that ends before the work request does, or cannot read it, is
	// no failure and no missing backend set: the outcome is unknown, kept
	// as ACCEPTED, and looked up by the next sync before anything else.
	notVisible := &oci.Error{Op: "GetWorkRequest", Status: 404, Code: "NotAuthorizedOrNotFound", Err: errors.New("no such work request")}
	for _, waitErr := range []error{context.DeadlineExceeded, notVisible} {
		t.Run(fmt.Sprint("outcome unknown: ", waitErr), func(t *testing.T) {
			ociClient := &backendsettest.API{WaitErrors: []error{waitErr}}
			req := Request{
				LoadBalancerID: "lb", Name: "bs",
				Input:        func(cur []plan.Backend) plan.Input { return plan.Input{Current: cur, Desired: want} },
				RecordIntent: func([]v1beta1.Backend) error { return nil },
				WaitTimeout:  time.Second,
			}
			res, err := Sync(context.Background(), ociClient, Backoff{Base: time.Millisecond, Max: time.Millisecond, Attempts: 3}, req)
			if !errors.Is(err, waitErr) || res.NotFound != nil || res.WorkRequest == nil || res.WorkRequest.Status != "ACCEPTED" {
				t.Fatalf("res %+v, err %v; want the error, the work request ACCEPTED, and the backend set not said missing", res, err)
			}
			req.Last = res.WorkRequest
			res, err = Sync(context.Background(), ociClient, Backoff{Base: time.Millisecond, Max: time.Millisecond, Attempts: 3}, req)
			if err != nil || res.Written || ociClient.Writes != 1 || res.WorkRequest.ID != req.Last.ID || res.WorkRequest.Status != "SUCCEEDED" {
				t.Fatalf("next sync: res %+v, err %v, %d writes; want the work request looked up, SUCCEEDED, and nothing written", res, err, ociClient.Writes)
			}
		})
	}

	t.Run("not found", func(t *testing.T) {
		ociClient := &notFoundAPI{err: gone}
		res, err := Sync(context.Background(), ociClient, Backoff{Base: time.Millisecond, Max: time.Millisecond, Attempts: 3}, Request{
			Input: func(cur []plan.Backend) plan.Input { return plan.Input{Current: cur} },
		})
		if err != nil || res.NotFound == nil {
			t.Fatalf("res, err = %+v, %v", res, err)
		}
	})
}

type notFoundAPI struct {
	backendsettest.API
	err error
}

func (n *notFoundAPI) GetBackendSet(context.Context, string, string) (*oci.BackendSet, error) {
	return nil, n.err
}

func TestBackoffHonoursRetryAfter(t *testing.T) {
	b := Backoff{Base: time.Millisecond, Max: 10 * time.Millisecond, Attempts: 5}
	for attempt := range 30 {
		d := b.delay(attempt, 0)
		if d <= 0 || d > b.Max {
			t.Fatalf("delay(%d) = %s outside (0, %s]", attempt, d, b.Max)
		}
	}
	b.Max = 5 * time.Second
	if d := b.delay(0, 2*time.Second); d != 2*time.Second {
		t.Fatalf("delay with Retry-After 2s = %s", d)
	}
}

// A Retry-After past the backoff maximum is cut to it: the wait keeps the
// load balancer's lane, deletions included.
func TestBackoffCapsRetryAfter(t *testing.T) {
	b := Backoff{Base: time.Millisecond, Max: 50 * time.Millisecond, Attempts: 5}
	for _, after := range []time.Duration{24 * time.Hour, time.Duration(math.MaxInt64)} {
		if d := b.delay(0, after); d != b.Max {
			t.Errorf("delay with Retry-After %s = %s, want %s", after, d, b.Max)
		}
	}
}

// A server asking to wait a day keeps the load balancer's lane for at most
// the backoff maximum, and shutdown ends even that wait at once.
func TestThrottledWriteWaitsBoundedAndInterruptibly(t *testing.T) {
	throttled := &oci.Error{Op: "UpdateBackendSet", Status: 429, Code: "TooManyRequests", Class: "throttled", RetryAfter: 24 * time.Hour, Err: errors.New("slow down")}
	want := []desired.Backend{{IP: "10.0.0.1", Port: 30080, Weight: 1}}
	sync := func(ctx context.Context, b Backoff) (time.Duration, error) {
		start := time.Now()
		_, err := Sync(ctx, &backendsettest.API{WriteErrors: []error{throttled}}, b, Request{
			LoadBalancerID: "lb", Name: "bs",
			Input:        func(cur []plan.Backend) plan.Input { return plan.Input{Current: cur, Desired: want} },
			RecordIntent: func([]v1beta1.Backend) error { return nil },
			WaitTimeout:  time.Second,
		})
		return time.Since(start), err
	}
	if took, err := sync(context.Background(), Backoff{Base: time.Millisecond, Max: 50 * time.Millisecond, Attempts: 3}); err != nil || took > 5*time.Second {
		t.Errorf("Retry-After of a day with a backoff maximum of 50ms: took %s, err %v", took, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if took, err := sync(ctx, Backoff{Base: time.Millisecond, Max: time.Hour, Attempts: 3}); !errors.Is(err, context.DeadlineExceeded) || took > 5*time.Second {
		t.Errorf("shutdown during the wait: took %s, err %v", took, err)
	}
}

// observingAPI records the lane while its work request runs.
type observingAPI struct {
	backendsettest.API
	lanes  *lanes.Lanes
	during []lanes.Status
}

func (o *observingAPI) WaitWorkRequest(ctx context.Context, lb, id string) error {
	o.during = o.lanes.Snapshot()
	return o.API.WaitWorkRequest(ctx, lb, id)
}

// A write reports its work request on the lane and logs its outcome with
// the load balancer, backend set, work request and duration.
func TestSyncReportsOnLaneAndLog(t *testing.T) {
	l := lanes.New()
	turn, _ := l.TryAcquire("lb", "res", nil)
	defer turn.Release()
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

	_, err := Sync(ctx, ociClient, Backoff{Base: time.Millisecond, Max: time.Millisecond, Attempts: 2}, Request{
		LoadBalancerID: "lb", Name: "api", Turn: turn, WaitTimeout: time.Second,
		Input: func(cur []plan.Backend) plan.Input {
			return plan.Input{Current: cur, Desired: []desired.Backend{{IP: "10.0.0.1", Port: 30080, Weight: 1}}}
		},
		RecordIntent: func([]v1beta1.Backend) error { return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(ociClient.during) != 1 || ociClient.during[0].Step.Phase != lanes.Waiting || ociClient.during[0].Step.WorkRequest != "wr-1" ||
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

// interruptedAPI is shut down while its write is on the wire, the moment
// OCI may have accepted it and not yet answered.
type interruptedAPI struct {
	backendsettest.API
	shutdown context.CancelFunc
}

func (a *interruptedAPI) UpdateBackendSet(ctx context.Context, bs *oci.BackendSet, backends []plan.Backend, failed string) (string, error) {
	a.shutdown()
	if err := ctx.Err(); err != nil {
		return "", err // the answer lost: OCI's work request runs unrecorded
	}
	return a.API.UpdateBackendSet(ctx, bs, backends, failed)
}

func (a *interruptedAPI) WaitWorkRequest(ctx context.Context, lb, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return a.API.WaitWorkRequest(ctx, lb, id)
}

// Shutdown during a write neither loses its answer nor stops the wait for
// its work request, so the outcome is recorded; a write not yet begun when
// shutdown comes is not sent.
func TestShutdownFinishesTheWriteUnderWay(t *testing.T) {
	want := []desired.Backend{{IP: "10.0.0.1", Port: 30080, Weight: 1}}
	sync := func(ctx context.Context, ociClient API, recordIntent func([]v1beta1.Backend) error) (Result, error) {
		return Sync(ctx, ociClient, Backoff{Base: time.Millisecond, Max: time.Millisecond, Attempts: 3}, Request{
			LoadBalancerID: "lb", Name: "bs", WaitTimeout: time.Second, ShutdownWait: time.Minute,
			Input:        func(cur []plan.Backend) plan.Input { return plan.Input{Current: cur, Desired: want} },
			RecordIntent: recordIntent,
		})
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ociClient := &interruptedAPI{shutdown: cancel}
	res, err := sync(ctx, ociClient, func([]v1beta1.Backend) error { return nil })
	if err != nil || !res.Written || res.WorkRequest == nil || res.WorkRequest.Status != WorkRequestSucceeded {
		t.Fatalf("shutdown during the write: %+v, %v", res, err)
	}
	if got := strings.Join(ociClient.Calls, "; "); got != "GetBackendSet bs; UpdateBackendSet bs [10.0.0.1:30080/1]; WaitWorkRequest wr-1" {
		t.Errorf("calls: %s", got)
	}

	ctx, cancel = context.WithCancel(context.Background())
	idle := &backendsettest.API{}
	res, err = sync(ctx, idle, func([]v1beta1.Backend) error { cancel(); return nil })
	if !errors.Is(err, context.Canceled) || res.Written || idle.Writes != 0 {
		t.Errorf("shutdown before the write: wrote %d, %+v, %v", idle.Writes, res, err)
	}
}

// A read still current is planned once, not again before its write; a
// read that is not is read and planned again.
func TestSyncPlansEachReadOnce(t *testing.T) {
	want := []desired.Backend{{IP: "10.0.0.1", Port: 30080, Weight: 1}}
	for _, tc := range []struct {
		current      bool
		plans, reads int
	}{{true, 1, 0}, {false, 2, 1}} {
		var plans int
		ociClient := &backendsettest.API{}
		_, err := Sync(context.Background(), ociClient, Backoff{Base: time.Millisecond, Max: time.Millisecond, Attempts: 3}, Request{
			LoadBalancerID: "lb", Name: "bs", WaitTimeout: time.Second,
			Prefetched: &oci.BackendSet{LoadBalancerID: "lb", Name: "bs"}, Current: tc.current,
			Input: func(cur []plan.Backend) plan.Input {
				plans++
				return plan.Input{Current: cur, Desired: want}
			},
			RecordIntent: func([]v1beta1.Backend) error { return nil },
		})
		if err != nil || plans != tc.plans || ociClient.Reads != tc.reads || ociClient.Writes != 1 {
			t.Errorf("current %t: planned %d times, read %d, wrote %d, err %v; want %d plans, %d reads, 1 write",
				tc.current, plans, ociClient.Reads, ociClient.Writes, err, tc.plans, tc.reads)
		}
	}
}
