package status

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/reconciler/ownership"
)

// A writer whose status patch conflicts with a newer record (a leader that
// finished a write while the next one already recorded) keeps that record
// and adds only the work requests it saw through.
func TestStatusConflictKeepsNewerRecord(t *testing.T) {
	ctx := context.Background()
	at := func(sec int) metav1.Time { return metav1.NewTime(time.Date(2026, 11, 23, 1, 0, sec, 0, time.UTC)) }
	backend := func(ip string) v1beta1.Backend { return v1beta1.Backend{IP: ip, Port: 30080, Weight: 1} }
	wr := func(id string, sec int) *v1beta1.WorkRequest {
		return &v1beta1.WorkRequest{ID: id, Status: "SUCCEEDED", Time: at(sec)}
	}

	stale := &v1beta1.LBRegistrar{ObjectMeta: metav1.ObjectMeta{Name: "res"}, Status: v1beta1.LBRegistrarStatus{
		BackendSets: []v1beta1.BackendSetStatus{
			{Name: "api", Backends: v1beta1.GroupBackends([]v1beta1.Backend{backend("10.0.0.1")})},
			{Name: "old", Backends: v1beta1.GroupBackends([]v1beta1.Backend{backend("10.0.0.1")})},
			{Name: "web", Backends: v1beta1.GroupBackends([]v1beta1.Backend{backend("10.0.0.1")})},
		},
	}}
	// What another writer recorded meanwhile: api has a second backend, old
	// was emptied and dropped, web was written again later.
	newer := v1beta1.LBRegistrarStatus{BackendSets: []v1beta1.BackendSetStatus{
		{Name: "api", Backends: v1beta1.GroupBackends([]v1beta1.Backend{backend("10.0.0.1"), backend("10.0.0.2")})},
		{Name: "web", Backends: v1beta1.GroupBackends([]v1beta1.Backend{backend("10.0.0.3")}), LastWorkRequest: wr("wr-web-newer", 30)},
	}}

	c := racedClient(t, stale, func(cur *v1beta1.LBRegistrar) {
		cur.Status = newer
		sign(cur)
	})

	obj := &v1beta1.LBRegistrar{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(stale), obj); err != nil {
		t.Fatal(err)
	}
	st := &Writer{rec: signingWriters(c), obj: obj, base: obj.DeepCopy()}
	// This writer saw three writes through; its view of the backends is stale.
	Entry(obj, "api").LastWorkRequest = wr("wr-api", 10)
	Entry(obj, "old").LastWorkRequest = wr("wr-old", 10)
	Entry(obj, "web").LastWorkRequest = wr("wr-web-older", 10)

	if err := st.Flush(ctx); !apierrors.IsConflict(err) {
		t.Fatalf("flush = %v, want a conflict so the reconcile runs again", err)
	}
	got := &v1beta1.LBRegistrar{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(stale), got); err != nil {
		t.Fatal(err)
	}
	want := []v1beta1.BackendSetStatus{
		{Name: "api", Backends: newer.BackendSets[0].Backends, LastWorkRequest: wr("wr-api", 10)},
		newer.BackendSets[1],
	}
	if diff := cmp.Diff(want, got.Status.BackendSets); diff != "" {
		t.Fatalf("stored records (-want +got):\n%s", diff)
	}
}

// A writer whose status patch conflicts with a status another reconcile
// wrote without touching the record (a suspension, recorded while a
// flight was in the air) records what its writes did: the backend it
// removed is no longer named, the set it registered is, and an entry the
// other reconcile changed keeps its change.
func TestStatusConflictKeepsWhatTheWritesDid(t *testing.T) {
	ctx := context.Background()
	before := &v1beta1.LBRegistrar{ObjectMeta: metav1.ObjectMeta{Name: "res"}, Status: v1beta1.LBRegistrarStatus{
		LoadBalancerID: "lb",
		BackendSets: []v1beta1.BackendSetStatus{
			{Name: "admin", Backends: group("10.0.0.1")},
			{Name: "api", Backends: group("10.0.0.1", "10.0.0.2")},
			{Name: "gone", Backends: group("10.0.0.1")},
		},
	}}
	// The suspension's reconcile: its condition, and admin recorded anew.
	c := racedClient(t, before, func(cur *v1beta1.LBRegistrar) {
		meta.SetStatusCondition(&cur.Status.Conditions, metav1.Condition{Type: v1beta1.ConditionReady, Status: metav1.ConditionFalse, Reason: "Suspended"})
		FindEntry(cur, "admin").Backends = group("10.0.0.9")
		sign(cur)
	})
	obj := &v1beta1.LBRegistrar{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(before), obj); err != nil {
		t.Fatal(err)
	}
	st := &Writer{rec: signingWriters(c), obj: obj, base: obj.DeepCopy()}
	// The flight's writes: api lost 10.0.0.2, gone was emptied, web was
	// registered, and admin was drained (which the newer status overrides).
	FindEntry(obj, "api").Backends = group("10.0.0.1")
	DropEntry(obj, "gone")
	Entry(obj, "web").Backends = group("10.0.0.3")
	FindEntry(obj, "admin").Drained = true

	if err := st.Flush(ctx); !apierrors.IsConflict(err) {
		t.Fatalf("flush = %v, want a conflict so the reconcile runs again", err)
	}
	got := &v1beta1.LBRegistrar{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(before), got); err != nil {
		t.Fatal(err)
	}
	want := []v1beta1.BackendSetStatus{
		{Name: "admin", Backends: group("10.0.0.9")},
		{Name: "api", Backends: group("10.0.0.1")},
		{Name: "web", Backends: group("10.0.0.3")},
	}
	if diff := cmp.Diff(want, got.Status.BackendSets); diff != "" {
		t.Errorf("stored records (-want +got):\n%s", diff)
	}
	if ready := meta.FindStatusCondition(got.Status.Conditions, v1beta1.ConditionReady); ready == nil || ready.Reason != "Suspended" {
		t.Errorf("Ready %+v, want the newer status's Suspended kept", ready)
	}
}

// An intent whose flush conflicts with a newer status (a suspension) is
// taken back: the writes that needed it are not made, so neither it nor
// the record's load balancer it carried first is stored by the reconcile's
// last flush, which conflicts too and still records what a write did.
func TestConflictingIntentIsTakenBack(t *testing.T) {
	ctx := context.Background()
	before := &v1beta1.LBRegistrar{ObjectMeta: metav1.ObjectMeta{Name: "res"}, Status: v1beta1.LBRegistrarStatus{
		BackendSets: []v1beta1.BackendSetStatus{
			{Name: "api", Backends: group("10.0.0.1")},
			{Name: "gone", Backends: group("10.0.0.1")},
		},
	}}
	c := racedClient(t, before, func(cur *v1beta1.LBRegistrar) {
		meta.SetStatusCondition(&cur.Status.Conditions, metav1.Condition{Type: v1beta1.ConditionReady, Status: metav1.ConditionFalse, Reason: "Suspended"})
	})
	obj := &v1beta1.LBRegistrar{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(before), obj); err != nil {
		t.Fatal(err)
	}
	st := &Writer{rec: signingWriters(c), obj: obj, base: obj.DeepCopy()}
	obj.Status.LoadBalancerID = "lb"
	intent := map[string][]v1beta1.Backend{
		"api": {backend("10.0.0.1"), backend("10.0.0.2")},
		"web": {backend("10.0.0.3")},
	}
	if err := st.Intend(ctx, intent); !apierrors.IsConflict(err) {
		t.Fatalf("intend = %v, want a conflict", err)
	}
	if diff := cmp.Diff(before.Status.BackendSets, obj.Status.BackendSets); diff != "" || obj.Status.LoadBalancerID != "" {
		t.Fatalf("record after the intent's conflict, load balancer %q (-before +after):\n%s", obj.Status.LoadBalancerID, diff)
	}
	// A write that needed no intent emptied gone; the last flush records it.
	DropEntry(obj, "gone")
	if err := st.Flush(ctx); !apierrors.IsConflict(err) {
		t.Fatalf("flush = %v, want a conflict", err)
	}
	got := &v1beta1.LBRegistrar{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(before), got); err != nil {
		t.Fatal(err)
	}
	want := []v1beta1.BackendSetStatus{{Name: "api", Backends: group("10.0.0.1")}}
	if diff := cmp.Diff(want, got.Status.BackendSets); diff != "" || got.Status.LoadBalancerID != "" {
		t.Errorf("stored record, load balancer %q (-want +got):\n%s", got.Status.LoadBalancerID, diff)
	}
}

// A writer whose status patch conflicts with a record someone else wrote
// meanwhile (a forgery naming another's backend) puts nothing of its own
// record on top of it, so the forgery never gets the controller's
// signature and stays ignored.
func TestStatusConflictSignsNoForgery(t *testing.T) {
	ctx := context.Background()
	before := &v1beta1.LBRegistrar{ObjectMeta: metav1.ObjectMeta{Name: "res"}, Status: v1beta1.LBRegistrarStatus{
		LoadBalancerID: "lb",
		BackendSets:    []v1beta1.BackendSetStatus{{Name: "api", Backends: group("10.0.0.1", "10.0.0.2")}},
	}}
	var forged []v1beta1.BackendSetStatus
	c := racedClient(t, before, func(cur *v1beta1.LBRegistrar) {
		Entry(cur, "admin").Backends = v1beta1.GroupBackends([]v1beta1.Backend{{IP: "10.0.0.9", Port: 32000, Weight: 1}})
		forged = cur.DeepCopy().Status.BackendSets
	})
	obj := &v1beta1.LBRegistrar{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(before), obj); err != nil {
		t.Fatal(err)
	}
	st := &Writer{rec: signingWriters(c), obj: obj, base: obj.DeepCopy()}
	FindEntry(obj, "api").Backends = group("10.0.0.1") // a write removed 10.0.0.2
	if err := st.Flush(ctx); !apierrors.IsConflict(err) {
		t.Fatalf("flush = %v, want a conflict", err)
	}
	got := &v1beta1.LBRegistrar{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(before), got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(forged, got.Status.BackendSets); diff != "" || ownership.Vouched(testKey, got) {
		t.Errorf("stored record vouched for: %v (-forged +got):\n%s", ownership.Vouched(testKey, got), diff)
	}
}

// testKey signs the records of the tests' objects.
var testKey = []byte("a status test's record signing key")

// testKeySecret has testKey.
var testKeySecret = types.NamespacedName{Namespace: "lbregistrar-system", Name: "record-key"}

// sign signs obj's record with testKey, as this controller would.
func sign(obj *v1beta1.LBRegistrar) { obj.Status.RecordSignature = ownership.Sign(testKey, obj) }

// signingWriters are Writers through c that sign with testKey.
func signingWriters(c client.Client) *Writers {
	return &Writers{client: c, reader: c, keys: &ownership.KeyStore{Reader: c, Writer: c, Secret: testKeySecret}}
}

func backend(ip string) v1beta1.Backend { return v1beta1.Backend{IP: ip, Port: 30080, Weight: 1} }

// group is the record's backend groups of the addresses, at backend's port.
func group(ips ...string) []v1beta1.BackendGroup {
	var bs []v1beta1.Backend
	for _, ip := range ips {
		bs = append(bs, backend(ip))
	}
	return v1beta1.GroupBackends(bs)
}

// racedClient is a fake client that has obj, its record signed with
// testKey (in testKeySecret), whose first status patch is preceded by
// another writer's status update, made by race on what is stored, so
// that the patch meets a conflict.
func racedClient(t *testing.T, obj *v1beta1.LBRegistrar, race func(cur *v1beta1.LBRegistrar)) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := v1beta1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	signed := obj.DeepCopy()
	sign(signed)
	key := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: testKeySecret.Namespace, Name: testKeySecret.Name},
		Data: map[string][]byte{ownership.KeyField: testKey}}
	raced := false
	return fake.NewClientBuilder().WithScheme(scheme).
		WithStatusSubresource(&v1beta1.LBRegistrar{}).
		WithObjects(signed, key).
		WithInterceptorFuncs(interceptor.Funcs{
			SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
				if !raced {
					raced = true
					cur := &v1beta1.LBRegistrar{}
					if err := c.Get(ctx, client.ObjectKeyFromObject(obj), cur); err != nil {
						return err
					}
					race(cur)
					if err := c.Status().Update(ctx, cur); err != nil {
						return err
					}
				}
				return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
			},
		}).Build()
}

// Status writes wait for one of a bounded number of slots: flights landing
// together (a node joining 100 load balancers) would otherwise send every
// record at once. A flush that changes nothing takes no slot.
func TestStatusWritesAreBounded(t *testing.T) {
	ctx := context.Background()
	scheme := runtime.NewScheme()
	if err := v1beta1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	const resources, bound = 12, 3
	var objs []client.Object
	for i := range resources {
		objs = append(objs, &v1beta1.LBRegistrar{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("res-%d", i)}})
	}
	var inProgress, most atomic.Int32
	c := fake.NewClientBuilder().WithScheme(scheme).
		WithStatusSubresource(&v1beta1.LBRegistrar{}).
		WithObjects(objs...).
		WithInterceptorFuncs(interceptor.Funcs{
			SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
				n := inProgress.Add(1)
				defer inProgress.Add(-1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				time.Sleep(20 * time.Millisecond)
				return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
			},
		}).Build()
	r := NewWriters(c, c, nil, nil, bound)
	var wg sync.WaitGroup
	for _, o := range objs {
		obj := &v1beta1.LBRegistrar{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(o), obj); err != nil {
			t.Fatal(err)
		}
		st, err := r.Open(ctx, obj)
		if err != nil {
			t.Fatal(err)
		}
		setCondition(obj, v1beta1.ConditionReady, metav1.ConditionTrue, v1beta1.ReasonRegistered, "written")
		wg.Go(func() {
			if err := st.Flush(ctx); err != nil {
				t.Error(err)
			}
			if err := st.Flush(ctx); err != nil { // nothing changed since
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if got := most.Load(); got != bound {
		t.Errorf("%d status writes in progress at most, want %d", got, bound)
	}
	if len(r.slots) != 0 {
		t.Errorf("%d slots still taken", len(r.slots))
	}
}

// A resource whose ownership records near what the API server can store is
// warned while splitting it is still a choice; one of a few backend sets of
// 5,000 nodes is not.
func TestLargeRecordIsWarned(t *testing.T) {
	owned := make([]v1beta1.Backend, 5000)
	for i := range owned {
		owned[i] = v1beta1.Backend{IP: fmt.Sprintf("10.%d.%d.%d", 100+i/62500, i/250%250, i%250+1), Port: 30443, Weight: 1}
	}
	for _, tc := range []struct {
		sets   int
		warned bool
	}{{3, false}, {16, false}, {18, true}} {
		t.Run(fmt.Sprintf("%d-backend-sets", tc.sets), func(t *testing.T) {
			r := NewWriters(nil, nil, events.NewFakeRecorder(100), nil, 0)
			obj := &v1beta1.LBRegistrar{ObjectMeta: metav1.ObjectMeta{Name: "large"}}
			for s := range tc.sets {
				rec := Entry(obj, fmt.Sprintf("set-%02d", s))
				rec.SetOwned(owned)
				rec.LastWorkRequest = &v1beta1.WorkRequest{ID: "ocid1.loadbalancerworkrequest.oc1..x", Status: "SUCCEEDED"}
			}
			raw, err := json.Marshal(obj.Status.BackendSets)
			if err != nil {
				t.Fatal(err)
			}
			if got := recordBytes(obj); got < len(raw)*9/10 || got > len(raw)*11/10 {
				t.Errorf("recordBytes %d, the records' JSON %d bytes", got, len(raw))
			}
			r.WarnLargeRecord(obj)
			recorder := r.events.(*events.FakeRecorder)
			var got []string
			for len(recorder.Events) > 0 {
				got = append(got, <-recorder.Events)
			}
			if warned := len(got) == 1 && strings.Contains(got[0], v1beta1.ReasonRecordLarge) && strings.Contains(got[0], fmt.Sprintf("%d backends in %d backend sets", 5000*tc.sets, tc.sets)); warned != tc.warned {
				t.Errorf("events %q, want warned %v", got, tc.warned)
			}
		})
	}
}
