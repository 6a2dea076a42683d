package reconciler

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
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
