package reconciler

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/reconciler/desired"
	"github.com/peppy-ratio/lbregistrar/reconciler/oci"
	"github.com/peppy-ratio/lbregistrar/reconciler/plan"
)

// scriptedAPI answers reads with its backends and fails writes as scripted.
type scriptedAPI struct {
	backends    []plan.Backend
	writeErrors []error // consumed one per write
	waitErrors  []error // consumed one per wait
	pending     []plan.Backend
	reads       int
	writes      int
	failed      []string   // what each write named as the failed work request before it
	inFlight    [][]string // others' work requests in flight, consumed one list per listing
	waited      []string   // the work requests waited for
}

func (s *scriptedAPI) WorkRequests(context.Context, string) ([]oci.WorkRequest, error) {
	if len(s.inFlight) == 0 {
		return nil, nil
	}
	var wrs []oci.WorkRequest
	for _, id := range s.inFlight[0] {
		wrs = append(wrs, oci.WorkRequest{ID: id})
	}
	s.inFlight = s.inFlight[1:]
	return wrs, nil
}

func (s *scriptedAPI) GetBackendSet(_ context.Context, lb, name string) (*oci.BackendSet, error) {
	s.reads++
	return &oci.BackendSet{LoadBalancerID: lb, Name: name, Backends: append([]plan.Backend(nil), s.backends...)}, nil
}

func (s *scriptedAPI) UpdateBackendSet(_ context.Context, _ *oci.BackendSet, backends []plan.Backend, failed string) (string, error) {
	s.writes++
	s.failed = append(s.failed, failed)
	if len(s.writeErrors) > 0 {
		err := s.writeErrors[0]
		s.writeErrors = s.writeErrors[1:]
		if err != nil {
			return "", err
		}
	}
	s.pending = backends
	return fmt.Sprint("wr-", s.writes), nil
}

func (s *scriptedAPI) WaitWorkRequest(_ context.Context, _, id string) error {
	s.waited = append(s.waited, id)
	if len(s.waitErrors) > 0 {
		err := s.waitErrors[0]
		s.waitErrors = s.waitErrors[1:]
		return err
	}
	s.backends = s.pending
	return nil
}

func (s *scriptedAPI) GetBackendSetHealth(context.Context, string, string) (*oci.BackendSetHealth, error) {
	return &oci.BackendSetHealth{Status: "OK"}, nil
}

func TestSyncBackendSetRetries(t *testing.T) {
	conflict := &oci.Error{Op: "UpdateBackendSet", Status: 409, Code: "Conflict", Reason: "conflict", Err: errors.New("busy")}
	stale := &oci.Error{Op: "UpdateBackendSet", Status: 412, Code: "NoEtagMatch", Reason: "precondition", Err: errors.New("etag")}
	denied := &oci.Error{Op: "UpdateBackendSet", Status: 401, Code: "NotAuthenticated", Err: errors.New("no")}
	failedWR := &oci.Error{Op: "WorkRequest", Code: "FAILED", Reason: "workrequest", Err: errors.New("failed")}
	gone := &oci.Error{Op: "GetBackendSet", Status: 404, Code: "NotFound", Err: errors.New("gone")}
	want := []desired.Backend{{IP: "10.0.0.1", Port: 30080, Weight: 1}}

	tests := []struct {
		name       string
		ociClient  *scriptedAPI
		wantWrites int
		wantErr    error
		wantReads  int
	}{
		{"no change, no write", &scriptedAPI{backends: []plan.Backend{{IP: "10.0.0.1", Port: 30080, Weight: 1}}}, 0, nil, 1},
		{"409 then ok", &scriptedAPI{writeErrors: []error{conflict, conflict}}, 3, nil, 3},
		{"412 re-reads", &scriptedAPI{writeErrors: []error{stale}}, 2, nil, 2},
		{"412 costs no attempt", &scriptedAPI{writeErrors: []error{stale, stale, stale, conflict, stale}}, 6, nil, 6},
		{"412s past their own budget cost attempts", &scriptedAPI{writeErrors: []error{stale, stale, stale, stale, stale, stale}}, 6, stale, 6},
		{"failed work request is retried", &scriptedAPI{waitErrors: []error{failedWR}}, 2, nil, 2},
		{"401 is not retried", &scriptedAPI{writeErrors: []error{denied}}, 1, denied, 1},
		{"attempts are bounded", &scriptedAPI{writeErrors: []error{conflict, conflict, conflict, conflict}}, 3, conflict, 3},
		// Another writer's work request in flight is waited out, then the
		// write goes again: no attempt spent.
		{"409 behind another writer's work request costs no attempt", &scriptedAPI{writeErrors: []error{conflict, conflict, conflict, conflict},
			inFlight: [][]string{{"theirs-1"}, {"theirs-2", "theirs-3"}, {"theirs-4"}, {"theirs-5"}}}, 5, nil, 5},
		{"waits for others are bounded too", &scriptedAPI{writeErrors: []error{conflict, conflict, conflict, conflict, conflict, conflict, conflict},
			inFlight: [][]string{{"a"}, {"b"}, {"c"}, {"d"}, {"e"}, {"f"}, {"g"}}}, 6, conflict, 6},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var intents int
			res, err := syncBackendSet(context.Background(), tc.ociClient, Backoff{Base: time.Millisecond, Max: 2 * time.Millisecond, Attempts: 3}, syncRequest{
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
			if tc.ociClient.writes != tc.wantWrites || tc.ociClient.reads != tc.wantReads {
				t.Errorf("writes, reads = %d, %d; want %d, %d", tc.ociClient.writes, tc.ociClient.reads, tc.wantWrites, tc.wantReads)
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
			ociClient := &scriptedAPI{}
			_, err := syncBackendSet(context.Background(), ociClient, Backoff{Base: time.Millisecond, Max: time.Millisecond, Attempts: 3}, syncRequest{
				LoadBalancerID: "lb", Name: "bs",
				Prefetched:   &oci.BackendSet{LoadBalancerID: "lb", Name: "bs", Backends: tc.prefetched, ETag: "read-before-another-set-was-written"},
				Input:        func(cur []plan.Backend) plan.Input { return plan.Input{Current: cur, Desired: want} },
				RecordIntent: func([]v1beta1.Backend) error { return nil },
				WaitTimeout:  time.Second,
			})
			if err != nil || ociClient.reads != tc.wantReads || ociClient.writes != tc.writes {
				t.Fatalf("err %v, reads %d, writes %d; want reads %d, writes %d", err, ociClient.reads, ociClient.writes, tc.wantReads, tc.writes)
			}
		})
	}

	// A write tried again after its work request failed names that work
	// request, so it gets a retry token of its own instead of the failure
	// replayed; the first write names the failure the record kept.
	t.Run("failed work request", func(t *testing.T) {
		ociClient := &scriptedAPI{waitErrors: []error{failedWR, failedWR}}
		_, err := syncBackendSet(context.Background(), ociClient, Backoff{Base: time.Millisecond, Max: time.Millisecond, Attempts: 3}, syncRequest{
			LoadBalancerID: "lb", Name: "bs", Last: &v1beta1.WorkRequest{ID: "wr-recorded", Status: "FAILED"},
			Input:        func(cur []plan.Backend) plan.Input { return plan.Input{Current: cur, Desired: want} },
			RecordIntent: func([]v1beta1.Backend) error { return nil },
			WaitTimeout:  time.Second,
		})
		if want := []string{"wr-recorded", "wr-1", "wr-2"}; err != nil || !slices.Equal(ociClient.failed, want) {
			t.Fatalf("err %v; writes named %q as failed before them, want %q", err, ociClient.failed, want)
		}
	})

	// A wait that ends before the work request does, or cannot read it, is
	// no failure and no missing backend set: the outcome is unknown, kept
	// as ACCEPTED, and looked up by the next sync before anything else.
	notVisible := &oci.Error{Op: "GetWorkRequest", Status: 404, Code: "NotAuthorizedOrNotFound", Err: errors.New("no such work request")}
	for _, waitErr := range []error{context.DeadlineExceeded, notVisible} {
		t.Run(fmt.Sprint("outcome unknown: ", waitErr), func(t *testing.T) {
			ociClient := &scriptedAPI{waitErrors: []error{waitErr}}
			req := syncRequest{
				LoadBalancerID: "lb", Name: "bs",
				Input:        func(cur []plan.Backend) plan.Input { return plan.Input{Current: cur, Desired: want} },
				RecordIntent: func([]v1beta1.Backend) error { return nil },
				WaitTimeout:  time.Second,
			}
			res, err := syncBackendSet(context.Background(), ociClient, Backoff{Base: time.Millisecond, Max: time.Millisecond, Attempts: 3}, req)
			if !errors.Is(err, waitErr) || res.NotFound != nil || res.WorkRequest == nil || res.WorkRequest.Status != "ACCEPTED" {
				t.Fatalf("res %+v, err %v; want the error, the work request ACCEPTED, and the backend set not said missing", res, err)
			}
			req.Last = res.WorkRequest
			res, err = syncBackendSet(context.Background(), ociClient, Backoff{Base: time.Millisecond, Max: time.Millisecond, Attempts: 3}, req)
			if err != nil || res.Written || ociClient.writes != 1 || res.WorkRequest.ID != req.Last.ID || res.WorkRequest.Status != "SUCCEEDED" {
				t.Fatalf("next sync: res %+v, err %v, %d writes; want the work request looked up, SUCCEEDED, and nothing written", res, err, ociClient.writes)
			}
		})
	}

	t.Run("not found", func(t *testing.T) {
		ociClient := &notFoundAPI{err: gone}
		res, err := syncBackendSet(context.Background(), ociClient, Backoff{Base: time.Millisecond, Max: time.Millisecond, Attempts: 3}, syncRequest{
			Input: func(cur []plan.Backend) plan.Input { return plan.Input{Current: cur} },
		})
		if err != nil || res.NotFound == nil {
			t.Fatalf("res, err = %+v, %v", res, err)
		}
	})
}

type notFoundAPI struct {
	scriptedAPI
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

// A Retry-After past the backoff maximum is cut to it: the wait holds the
// load balancer's lane, deletions included.
func TestBackoffCapsRetryAfter(t *testing.T) {
	b := Backoff{Base: time.Millisecond, Max: 50 * time.Millisecond, Attempts: 5}
	for _, after := range []time.Duration{24 * time.Hour, time.Duration(math.MaxInt64)} {
		if d := b.delay(0, after); d != b.Max {
			t.Errorf("delay with Retry-After %s = %s, want %s", after, d, b.Max)
		}
	}
}

// A server asking to wait a day holds the load balancer's lane for at most
// the backoff maximum, and shutdown ends even that wait at once.
func TestThrottledWriteWaitsBoundedAndInterruptibly(t *testing.T) {
	throttled := &oci.Error{Op: "UpdateBackendSet", Status: 429, Code: "TooManyRequests", Reason: "throttled", RetryAfter: 24 * time.Hour, Err: errors.New("slow down")}
	want := []desired.Backend{{IP: "10.0.0.1", Port: 30080, Weight: 1}}
	sync := func(ctx context.Context, b Backoff) (time.Duration, error) {
		start := time.Now()
		_, err := syncBackendSet(ctx, &scriptedAPI{writeErrors: []error{throttled}}, b, syncRequest{
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
