package reconciler

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/reconciler/backendset"
	"github.com/peppy-ratio/lbregistrar/reconciler/backendset/backendsettest"
	"github.com/peppy-ratio/lbregistrar/reconciler/decide"
	"github.com/peppy-ratio/lbregistrar/reconciler/desired"
	"github.com/peppy-ratio/lbregistrar/reconciler/oci"
	"github.com/peppy-ratio/lbregistrar/reconciler/plan"
	"github.com/peppy-ratio/lbregistrar/reconciler/status"
)

// Each way one backend set's write can end, shown by the exact calls the
// write path makes to OCI (as Kubernetes' service controller tests show
// the cloud calls), and by what it leaves in the ownership record, the
// outcome and the events.
func TestWriteEndings(t *testing.T) {
	node := plan.Backend{IP: "10.0.0.1", Port: 30080, Weight: 1}
	departed := plan.Backend{IP: "10.0.0.9", Port: 30080, Weight: 1}
	want := []desired.Backend{{IP: node.IP, Port: node.Port, Weight: 1}}
	refusal := &oci.Error{Op: "UpdateBackendSet", Status: 400, Code: "InvalidParameter", Err: errors.New("bad backend")}
	denied := &oci.Error{Op: "UpdateBackendSet", Status: 401, Code: "NotAuthenticated", Err: errors.New("no")}
	conflict := &oci.Error{Op: "UpdateBackendSet", Status: 409, Code: "Conflict", Class: oci.ClassConflict, Err: errors.New("busy")}
	notFound := &oci.Error{Op: "GetBackendSet", Status: 404, Code: "NotFound", Err: errors.New("no such backend set")}
	const (
		get    = "GetBackendSet api"
		update = "UpdateBackendSet api "
	)
	tests := []struct {
		name     string
		mode     plan.Mode
		deleting bool
		owned    []plan.Backend // the record's, and what OCI has registered
		oci      backendsettest.API
		// want: the calls to OCI; the record's owned backends after ("-"
		// for no record); a failure reported, and whether it fails the
		// reconcile; and the events' reasons.
		calls        []string
		record       string
		failure      string
		err, revisit bool
		events       []string
	}{{
		name: "in line already: read, nothing written", mode: plan.Apply, owned: []plan.Backend{node},
		calls: []string{get}, record: "10.0.0.1:30080",
	}, {
		name: "in line: the addition written and waited for", mode: plan.Apply,
		calls:  []string{get, update + "[10.0.0.1:30080/1]", "WaitWorkRequest wr-1"},
		record: "10.0.0.1:30080", events: []string{"BackendSetUpdated"},
	}, {
		name: "refused: planned again at once without the additions", mode: plan.Apply, owned: []plan.Backend{departed},
		oci:   backendsettest.API{WriteErrors: []error{refusal}},
		calls: []string{get, update + "[10.0.0.1:30080/1]"},
		// The departed node stays while its replacement waits (the set
		// would have none of this resource's otherwise); the refused one is
		// not recorded.
		record: "10.0.0.9:30080", failure: "OCI refused adding 1 backends", revisit: true,
		events: []string{v1beta1.ReasonWriteRefused},
	}, {
		name: "failed: the reconcile fails, the intent stays recorded", mode: plan.Apply,
		oci:    backendsettest.API{WriteErrors: []error{denied}},
		calls:  []string{get, update + "[10.0.0.1:30080/1]"},
		record: "10.0.0.1:30080", failure: "NotAuthenticated", err: true, events: []string{v1beta1.ReasonWriteFailed},
	}, {
		name: "409: another writer's work request is waited out, then written", mode: plan.Apply,
		oci: backendsettest.API{WriteErrors: []error{conflict}, InFlight: [][]string{{"theirs"}}},
		calls: []string{get, update + "[10.0.0.1:30080/1]", "WorkRequests", "WaitWorkRequest theirs",
			get, update + "[10.0.0.1:30080/1]", "WaitWorkRequest wr-2"},
		record: "10.0.0.1:30080", events: []string{"BackendSetUpdated"},
	}, {
		name: "missing: 404 while registering fails the reconcile", mode: plan.Apply,
		oci:    backendsettest.API{ReadErrors: []error{notFound, notFound}},
		calls:  []string{get, get},
		record: "-", failure: `backend set "api" not found in load balancer lb`, err: true,
	}, {
		name: "gone: 404 while leaving drops the record", mode: plan.Retire, owned: []plan.Backend{departed},
		oci:    backendsettest.API{ReadErrors: []error{notFound, notFound}},
		calls:  []string{get, get},
		record: "-",
	}, {
		name: "drained on deletion: kept in the record", mode: plan.Drain, deleting: true, owned: []plan.Backend{departed},
		calls:  []string{get, update + "[10.0.0.9:30080/1 drain]", "WaitWorkRequest wr-1"},
		record: "10.0.0.9:30080", events: []string{"BackendSetUpdated"},
	}, {
		name: "emptied on deletion: the record goes", mode: plan.Remove, deleting: true, owned: []plan.Backend{departed},
		calls:  []string{get, update + "[]", "WaitWorkRequest wr-1"},
		record: "-", events: []string{"BackendSetUpdated"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			api := tc.oci
			api.Backends = tc.owned
			obj := &v1beta1.LBRegistrar{
				ObjectMeta: metav1.ObjectMeta{Name: "res", Generation: 1, Finalizers: []string{Finalizer}},
				Spec:       v1beta1.LBRegistrarSpec{LoadBalancerID: "lb", Services: []v1beta1.Target{{NodePort: node.Port, BackendSetName: "api", Weight: 1}}},
				Status:     v1beta1.LBRegistrarStatus{LoadBalancerID: "lb"},
			}
			if tc.deleting {
				obj.DeletionTimestamp = &metav1.Time{Time: metav1.Now().Time}
			}
			if len(tc.owned) > 0 {
				var owned []v1beta1.Backend
				for _, b := range tc.owned {
					owned = append(owned, v1beta1.Backend{IP: b.IP, Port: b.Port, Weight: b.Weight})
				}
				obj.Status.BackendSets = []v1beta1.BackendSetStatus{{Name: "api", Backends: v1beta1.GroupBackends(owned)}}
			}
			r := unitReconciler(t, &api, obj)
			st, err := r.status.Open(ctx, obj)
			if err != nil {
				t.Fatal(err)
			}
			turn, _ := r.lanes.TryAcquire("lb", obj.Name, func() {})
			defer turn.Release()
			s := &scope{st: st, obj: st.Object(), oci: &api, turn: turn, lb: "lb", deleting: tc.deleting, logger: logr.Discard()}
			job := decide.Job{Name: "api", Mode: tc.mode}
			if tc.mode == plan.Apply {
				job.Want = want
			}

			r.write(ctx, s, []decide.Job{job})

			if diff := cmp.Diff(tc.calls, api.Calls); diff != "" {
				t.Errorf("calls to OCI (-want +got):\n%s", diff)
			}
			if got := recordOf(s.obj, "api"); got != tc.record {
				t.Errorf("record = %q, want %q", got, tc.record)
			}
			failures := s.out.Messages()
			if (tc.failure == "") != (failures == "") || !strings.Contains(failures, tc.failure) {
				t.Errorf("failures = %q, want %q", failures, tc.failure)
			}
			if (s.out.Err != nil) != tc.err || s.out.RevisitAt.IsZero() == tc.revisit {
				t.Errorf("err = %v, revisit at %v; want err %t, revisit %t", s.out.Err, s.out.RevisitAt, tc.err, tc.revisit)
			}
			if diff := cmp.Diff(tc.events, eventReasons(r.events)); diff != "" {
				t.Errorf("event reasons (-want +got):\n%s", diff)
			}
		})
	}
}

// recordOf lists the backends obj's record of a backend set owns, or "-"
// when there is no record.
func recordOf(obj *v1beta1.LBRegistrar, name string) string {
	rec := status.FindEntry(obj, name)
	if rec == nil {
		return "-"
	}
	var keys []string
	for _, b := range rec.Owned() {
		keys = append(keys, plan.Key(b.IP, b.Port))
	}
	return strings.Join(keys, ",")
}

// eventReasons drains the fake recorder and returns each event's reason.
func eventReasons(rec events.EventRecorder) []string {
	var reasons []string
	for {
		select {
		case e := <-rec.(*events.FakeRecorder).Events:
			reasons = append(reasons, strings.Fields(e)[1])
		default:
			return reasons
		}
	}
}

// judge decides from the sync alone: a table over every ending.
func TestJudge(t *testing.T) {
	refusal := &oci.Error{Op: "UpdateBackendSet", Status: 400, Err: errors.New("bad")}
	notFound := &oci.Error{Op: "GetBackendSet", Status: 404, Err: errors.New("gone")}
	adds := backendset.Result{Plan: plan.Plan{Added: []string{"10.0.0.1:30080"}}}
	owned := backendset.Result{Plan: plan.Plan{Owned: []v1beta1.Backend{{IP: "10.0.0.1", Port: 30080, Weight: 1}}}}
	tests := []struct {
		mode     plan.Mode
		deleting bool
		res      backendset.Result
		err      error
		want     ending
	}{
		{plan.Apply, false, adds, refusal, refused},
		{plan.Apply, false, backendset.Result{}, refusal, failed}, // nothing added: nothing to leave out
		{plan.Drain, true, adds, refusal, failed},                 // a deletion adds nothing
		{plan.Apply, false, adds, errors.New("timeout"), failed},
		{plan.Retire, false, backendset.Result{NotFound: notFound}, nil, gone},
		{plan.Remove, true, backendset.Result{NotFound: notFound}, nil, gone},
		{plan.Apply, false, backendset.Result{NotFound: notFound}, nil, missing},
		{plan.Hold, false, backendset.Result{NotFound: notFound}, nil, missing},
		{plan.Remove, true, backendset.Result{}, nil, emptied},
		{plan.Retire, false, backendset.Result{}, nil, emptied},
		{plan.Retire, false, owned, nil, inLine}, // still draining
		{plan.Drain, true, backendset.Result{}, nil, inLine},
		{plan.Apply, false, backendset.Result{}, nil, inLine},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprint(tc.mode, tc.deleting, tc.err, tc.res.NotFound != nil), func(t *testing.T) {
			w := &setWrite{job: &decide.Job{Name: "api", Mode: tc.mode}}
			if got := judge(w, tc.deleting, tc.res, tc.err); got.kind != tc.want {
				t.Errorf("ending %d, want %d", got.kind, tc.want)
			}
		})
	}
}
