package reconciler

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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/reconciler/backendset/backendsettest"
	"github.com/peppy-ratio/lbregistrar/reconciler/lanes"
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

	scheme := runtime.NewScheme()
	if err := v1beta1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	raced := false
	c := fake.NewClientBuilder().WithScheme(scheme).
		WithStatusSubresource(&v1beta1.LBRegistrar{}).
		WithObjects(stale.DeepCopy()).
		WithInterceptorFuncs(interceptor.Funcs{
			SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
				if !raced {
					raced = true
					cur := &v1beta1.LBRegistrar{}
					if err := c.Get(ctx, client.ObjectKeyFromObject(obj), cur); err != nil {
						return err
					}
					cur.Status = newer
					if err := c.Status().Update(ctx, cur); err != nil {
						return err
					}
				}
				return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
			},
		}).Build()

	obj := &v1beta1.LBRegistrar{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(stale), obj); err != nil {
		t.Fatal(err)
	}
	st := &statusWriter{client: c, reader: c, obj: obj, base: obj.DeepCopy()}
	// This writer saw three writes through; its view of the backends is stale.
	record(obj, "api").LastWorkRequest = wr("wr-api", 10)
	record(obj, "old").LastWorkRequest = wr("wr-old", 10)
	record(obj, "web").LastWorkRequest = wr("wr-web-older", 10)

	if err := st.flush(ctx); !apierrors.IsConflict(err) {
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

// The cache learns of a status write only from its watch. A reconcile that
// runs before it has (the one woken as a flight lands, when a node joined
// meanwhile) reads past the cache, so its own status write is computed from
// the version last written, not refused with a conflict and retried after a
// backoff.
func TestReconcileReadsPastACacheBehindItsOwnWrite(t *testing.T) {
	obj := &v1beta1.LBRegistrar{
		ObjectMeta: metav1.ObjectMeta{Name: "res", Finalizers: []string{Finalizer}},
		Spec: v1beta1.LBRegistrarSpec{
			LoadBalancerID: "lb",
			APIKey:         v1beta1.APIKey{PrivateKey: v1beta1.SecretKeySource{Namespace: "keys", SecretKeyRef: v1beta1.SecretKeyRef{Name: "key", Key: "pem"}}},
			Services:       []v1beta1.Target{{NodePort: 30080, BackendSetName: "api", Weight: 1}},
		},
	}
	node := func(name, ip string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}},
		}}
	}
	ociClient := &backendsettest.API{}
	r := unitReconciler(t, ociClient, obj, node("a", "10.0.0.1"),
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "keys", Name: "key"}, Data: map[string][]byte{"pem": []byte("key")}})
	var failed []string
	r.flights = lanes.NewFlights(func(name string, _ time.Duration) { failed = append(failed, name) })
	api := r.client
	reconcile := func() {
		t.Helper()
		if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(obj)}); err != nil {
			t.Fatal(err)
		}
		r.flights.Wait()
	}

	// The cache keeps the version before the first reconcile's writes.
	var cached v1beta1.LBRegistrar
	if err := api.Get(context.Background(), client.ObjectKeyFromObject(obj), &cached); err != nil {
		t.Fatal(err)
	}
	r.client = interceptor.NewClient(api.(client.WithWatch), interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, o client.Object, opts ...client.GetOption) error {
			if lbr, ok := o.(*v1beta1.LBRegistrar); ok {
				cached.DeepCopyInto(lbr)
				return nil
			}
			return c.Get(ctx, key, o, opts...)
		},
	})
	reconcile()
	if err := api.Create(context.Background(), node("b", "10.0.0.2")); err != nil {
		t.Fatal(err)
	}
	reconcile()
	if len(failed) != 0 || ociClient.Writes != 2 {
		t.Errorf("%d writes, reconciles Failed: %v; want both nodes written, one each, and no failure", ociClient.Writes, failed)
	}
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
	r := &Reconciler{client: c, apiReader: c, statusSlots: make(statusSlots, bound)}
	var wg sync.WaitGroup
	for _, o := range objs {
		obj := &v1beta1.LBRegistrar{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(o), obj); err != nil {
			t.Fatal(err)
		}
		st, err := r.statusWriterFor(ctx, obj)
		if err != nil {
			t.Fatal(err)
		}
		setCondition(obj, v1beta1.ConditionReady, metav1.ConditionTrue, v1beta1.ReasonRegistered, "written")
		wg.Go(func() {
			if err := st.flush(ctx); err != nil {
				t.Error(err)
			}
			if err := st.flush(ctx); err != nil { // nothing changed since
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if got := most.Load(); got != bound {
		t.Errorf("%d status writes in progress at most, want %d", got, bound)
	}
	if len(r.statusSlots) != 0 {
		t.Errorf("%d slots still taken", len(r.statusSlots))
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
			r := unitReconciler(t, nil)
			obj := &v1beta1.LBRegistrar{ObjectMeta: metav1.ObjectMeta{Name: "large"}}
			for s := range tc.sets {
				rec := record(obj, fmt.Sprintf("set-%02d", s))
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
			r.warnLargeRecord(obj)
			recorder := r.events.(*events.FakeRecorder)
			var got []string
			for len(recorder.Events) > 0 {
				got = append(got, <-recorder.Events)
			}
			if warned := len(got) == 1 && strings.Contains(got[0], ReasonRecordLarge) && strings.Contains(got[0], fmt.Sprintf("%d backends in %d backend sets", 5000*tc.sets, tc.sets)); warned != tc.warned {
				t.Errorf("events %q, want warned %v", got, tc.warned)
			}
		})
	}
}
