package reconciler

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	dto "github.com/prometheus/client_model/go"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/index"
	"github.com/peppy-ratio/lbregistrar/reconciler/metrics"
	"github.com/peppy-ratio/lbregistrar/reconciler/nodeviews"
)

// Watch events map to resources listed in place from the cache, never
// copied: a resource's status records every backend it registered, so a
// copy of every resource for every node event does not scale (at 5,000
// nodes, a controller starting maps 5,000 node events; BenchmarkScale).
func TestWatchEventsListResourcesInPlace(t *testing.T) {
	obj := &v1beta1.LBRegistrar{
		ObjectMeta: metav1.ObjectMeta{Name: "ingress"},
		Spec: v1beta1.LBRegistrarSpec{
			LoadBalancerID: "ocid1.loadbalancer.oc1.iad.watches",
			APIKey:         &v1beta1.APIKey{PrivateKey: v1beta1.SecretKeySource{Namespace: "keys", SecretKeyRef: v1beta1.SecretKeyRef{Name: "key", Key: "pem"}}},
			Services: []v1beta1.Target{{Namespace: "web", Name: "gateway", Port: &intstr.IntOrString{IntVal: 443},
				BackendSetName: "https", Weight: 1, FilterByEndpoints: true}},
		},
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1beta1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	var lists, copied int
	c := interceptor.NewClient(fake.NewClientBuilder().WithScheme(scheme).WithObjects(obj).
		WithIndex(&v1beta1.LBRegistrar{}, index.ClaimField, index.ClaimFieldKeys).
		WithIndex(&v1beta1.LBRegistrar{}, index.ServiceField, index.ServiceFieldKeys).
		WithIndex(&v1beta1.LBRegistrar{}, secretIndex, indexSecrets).Build(),
		interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if _, ok := list.(*v1beta1.LBRegistrarList); ok {
				lists++
				if o := (&client.ListOptions{}).ApplyOptions(opts); o.UnsafeDisableDeepCopy == nil || !*o.UnsafeDisableDeepCopy {
					copied++
				}
			}
			return c.List(ctx, list, opts...)
		}})
	r := &Reconciler{client: c, nodes: nodeviews.New(c)}
	ctx := context.Background()
	other := obj.DeepCopy()
	other.Name = "other"
	for event, mapped := range map[string]int{
		"node":          len(r.nodeEvent(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}})),
		"Service":       len(r.byService(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "gateway"}})),
		"EndpointSlice": len(r.byEndpointSlice(ctx, &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "gateway-1", Labels: map[string]string{discoveryv1.LabelServiceName: "gateway"}}})),
		"Secret":        len(r.bySecret(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "keys", Name: "key"}})),
		"claim sibling": len(r.claimSiblings(ctx, other)),
	} {
		if mapped != 1 {
			t.Errorf("a %s event maps to %d resources, want 1", event, mapped)
		}
	}
	if lists == 0 || copied > 0 {
		t.Errorf("%d of %d lists of LBRegistrars copied every resource", copied, lists)
	}
}

// A batch opens with a change, stays open while changes keep coming
// within the quiet time of each other, and is enqueued once they pause or
// once the period has passed since it opened; every kind of event is
// held; a period of 0 leaves the handler as it is; each resource has its
// own batch.
func TestBatchesCloseOnAPauseOrAtThePeriod(t *testing.T) {
	web, api := reconcile.Request{NamespacedName: types.NamespacedName{Name: "web"}}, reconcile.Request{NamespacedName: types.NamespacedName{Name: "api"}}
	to := web
	h := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request { return []reconcile.Request{to} })
	if got := newBatches(0, time.Second, clock.RealClock{}).handler(h); got != h {
		t.Errorf("the handler with no period = %T, want h itself", got)
	}
	ctx, slice := context.Background(), &discoveryv1.EndpointSlice{}
	closed := func() (count uint64, sum float64) {
		var m dto.Metric
		if err := metrics.EndpointBatchDuration.Write(&m); err != nil {
			t.Fatal(err)
		}
		return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
	}
	count0, sum0 := closed()
	clk := clocktesting.NewFakeClock(time.Now())
	b := newBatches(time.Second, 300*time.Millisecond, clk).handler(h)
	q := &recordingQueue{}
	step := func(d time.Duration, want int, why string) {
		t.Helper()
		clk.Step(d)
		if q.added != want {
			t.Errorf("%s: %d enqueued, want %d", why, q.added, want)
		}
	}
	b.Create(ctx, event.CreateEvent{Object: slice}, q)
	step(299*time.Millisecond, 0, "within the quiet time of the only change")
	step(time.Millisecond, 1, "the quiet time after the only change")

	b.Update(ctx, event.UpdateEvent{ObjectOld: slice, ObjectNew: slice}, q)
	step(200*time.Millisecond, 1, "200ms into a batch")
	b.Delete(ctx, event.DeleteEvent{Object: slice}, q)
	step(200*time.Millisecond, 1, "200ms after the second change")
	b.Generic(ctx, event.GenericEvent{Object: slice}, q)
	step(200*time.Millisecond, 1, "200ms after the third change")
	to = api
	b.Create(ctx, event.CreateEvent{Object: slice}, q)
	to = web
	b.Update(ctx, event.UpdateEvent{ObjectOld: slice, ObjectNew: slice}, q)
	step(200*time.Millisecond, 1, "changes coming on, 800ms into a batch")
	b.Update(ctx, event.UpdateEvent{ObjectOld: slice, ObjectNew: slice}, q)
	step(100*time.Millisecond, 2, "the quiet time after another resource's only change")
	step(99*time.Millisecond, 2, "changes coming on, 999ms into a batch")
	step(time.Millisecond, 3, "a second into a batch, though changes keep coming")
	step(time.Second, 3, "nothing more")
	if count, sum := closed(); count-count0 != 3 || sum-sum0 < 1.599 || sum-sum0 > 1.601 {
		t.Errorf("%d batches observed closing after %.3fs in all, want 3, after 0.3s, 0.3s and 1s", count-count0, sum-sum0)
	}
	if q.after != nil {
		t.Errorf("added after a delay: %v; want every request held in its batch", q.after)
	}

	b = newBatches(time.Second, 0, clk).handler(h)
	b.Create(ctx, event.CreateEvent{Object: slice}, q)
	step(999*time.Millisecond, 3, "no quiet time, within the period")
	step(time.Millisecond, 4, "no quiet time, at the period")
}

// recordingQueue counts what is added to it, at once and after a delay.
type recordingQueue struct {
	workqueue.TypedRateLimitingInterface[reconcile.Request]
	added int
	after map[time.Duration]int
}

func (q *recordingQueue) Add(reconcile.Request) { q.added++ }

func (q *recordingQueue) AddAfter(_ reconcile.Request, d time.Duration) {
	if q.after == nil {
		q.after = map[time.Duration]int{}
	}
	q.after[d]++
}
