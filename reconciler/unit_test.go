package reconciler

import (
	"context"
	"reflect"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/index"
	"github.com/peppy-ratio/lbregistrar/reconciler/backendset"
	"github.com/peppy-ratio/lbregistrar/reconciler/backendset/backendsettest"
	"github.com/peppy-ratio/lbregistrar/reconciler/credentials"
	"github.com/peppy-ratio/lbregistrar/reconciler/gates"
	"github.com/peppy-ratio/lbregistrar/reconciler/lanes"
	"github.com/peppy-ratio/lbregistrar/reconciler/lbwatch"
	"github.com/peppy-ratio/lbregistrar/reconciler/metrics"
	"github.com/peppy-ratio/lbregistrar/reconciler/oci"
	"github.com/peppy-ratio/lbregistrar/reconciler/ownership"
	"github.com/peppy-ratio/lbregistrar/reconciler/plan"
	"github.com/peppy-ratio/lbregistrar/reconciler/preview"
	"github.com/peppy-ratio/lbregistrar/reconciler/status"
)

// panickingAPI panics on a write, as a bug in a reconcile would.
type panickingAPI struct {
	backendsettest.API
	reached atomic.Bool
}

func (p *panickingAPI) UpdateBackendSet(context.Context, *oci.BackendSet, []plan.Backend, string) (string, error) {
	p.reached.Store(true)
	panic("write")
}

// A reconcile that panics while it has a load balancer's lane, registering
// (in its flight) or deregistering (in the reconcile), releases it, and the
// resource is retried: a lane kept would block that load balancer forever.
func TestPanicInReconcileReleasesTheLane(t *testing.T) {
	backend := v1beta1.Backend{IP: "10.0.0.1", Port: 30080, Weight: 1}
	deleted := metav1.Now()
	for name, obj := range map[string]*v1beta1.LBRegistrar{
		"registering": {ObjectMeta: metav1.ObjectMeta{Name: "res", Finalizers: []string{Finalizer}}},
		"deleting": {
			ObjectMeta: metav1.ObjectMeta{Name: "res", Finalizers: []string{Finalizer}, DeletionTimestamp: &deleted},
			Status:     v1beta1.LBRegistrarStatus{LoadBalancerID: "lb", BackendSets: []v1beta1.BackendSetStatus{{Name: "api", Backends: v1beta1.GroupBackends([]v1beta1.Backend{backend})}}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			obj.Spec = v1beta1.LBRegistrarSpec{
				LoadBalancerID: "lb",
				APIKey:         &v1beta1.APIKey{PrivateKey: v1beta1.SecretKeySource{Namespace: "keys", SecretKeyRef: v1beta1.SecretKeyRef{Name: "key", Key: "pem"}}},
				Services:       []v1beta1.Target{{NodePort: backend.Port, BackendSetName: "api", Weight: 1}},
			}
			ociClient := &panickingAPI{API: backendsettest.API{Backends: []plan.Backend{{IP: backend.IP, Port: backend.Port, Weight: 1}}}}
			r := unitReconciler(t, ociClient, obj,
				&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "keys", Name: "key"}, Data: map[string][]byte{"pem": []byte("key")}},
				&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node"}, Status: corev1.NodeStatus{
					Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.2"}},
				}})
			var requeued []string
			r.flights = lanes.NewFlights(func(name string, _ time.Duration) { requeued = append(requeued, name) })

			recovered := reconcileRecovering(r, obj.Name)
			r.flights.Wait()
			if !ociClient.reached.Load() {
				t.Fatal("the reconcile did not reach the write")
			}
			if recovered == nil && !slices.Equal(requeued, []string{obj.Name}) {
				t.Fatalf("the flight's panic was recovered, but the resource was requeued %v", requeued)
			}
			if busy := r.lanes.Snapshot(); len(busy) != 0 {
				t.Fatalf("lanes after the panic: %+v", busy)
			}
		})
	}
}

// unitRecordKey signs the records of unitReconciler's objects.
var unitRecordKey = []byte("a unit test's record signing key")

// signRecord signs lbr's record as unitReconciler's controller would.
func signRecord(lbr *v1beta1.LBRegistrar) {
	lbr.Status.RecordSignature = ownership.Sign(unitRecordKey, lbr)
}

// unitReconciler is a Reconciler over a fake client serving objs, writing
// through api.
func unitReconciler(t *testing.T, ociClient ociAPI, objs ...client.Object) *Reconciler {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1beta1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	// The records the objects carry are the controller's own.
	recordKey := client.ObjectKey{Namespace: "lbregistrar-system", Name: DefaultRecordKeySecret}
	for _, o := range objs {
		if lbr, ok := o.(*v1beta1.LBRegistrar); ok && ownership.Recorded(lbr) {
			signRecord(lbr)
		}
	}
	objs = append(objs, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: recordKey.Namespace, Name: recordKey.Name}, Data: map[string][]byte{ownership.KeyField: unitRecordKey}})
	c := fake.NewClientBuilder().WithScheme(scheme).
		WithStatusSubresource(&v1beta1.LBRegistrar{}).
		WithIndex(&v1beta1.LBRegistrar{}, index.ClaimField, index.ClaimFieldKeys).
		WithObjects(objs...).Build()
	secrets := credentials.NewSecrets(c, nil)
	recorder := events.NewFakeRecorder(100)
	records := &ownership.KeyStore{Reader: c, Writer: c, Secret: recordKey}
	return &Reconciler{
		client:    c,
		apiReader: c,
		secrets:   secrets,
		events:    recorder,
		builders:  credentials.Builders[ociAPI]{Key: func(oci.Credentials) (ociAPI, error) { return ociClient, nil }},
		lanes:     lanes.New(),
		watch:     lbwatch.New(0, 1, func(string) {}),
		flights:   lanes.NewFlights(func(string, time.Duration) {}),
		pending:   preview.NewPending(),
		gates:     &gates.Controller{},
		keys:      records,
		status:    status.NewWriters(c, c, recorder, records, 0),
		opts:      Options{Backoff: backendset.Backoff{Base: time.Millisecond, Max: time.Millisecond, Attempts: 1}, WorkRequestTimeout: time.Second, RecordKey: recordKey},
	}
}

// reconcileRecovering reconciles the named resource and returns what it
// panicked with, recovering as controller-runtime does.
func reconcileRecovering(r *Reconciler, name string) (recovered any) {
	defer func() { recovered = recover() }()
	_, _ = r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Name: name}})
	return nil
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
			APIKey:         &v1beta1.APIKey{PrivateKey: v1beta1.SecretKeySource{Namespace: "keys", SecretKeyRef: v1beta1.SecretKeyRef{Name: "key", Key: "pem"}}},
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

// A resource that is gone has its API key's Secret values dropped, so key
// material no resource uses leaves the process's memory: the next read of
// that Secret goes to the API server again, where a kept value would not.
func TestGoneResourceForgetsItsKey(t *testing.T) {
	ctx := context.Background()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "keys", Name: "key"}, Data: map[string][]byte{"pem": []byte("key")}}
	r := unitReconciler(t, nil, secret)
	var reads int
	r.secrets = credentials.NewSecrets(interceptor.NewClient(r.client.(client.WithWatch), interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, o client.Object, opts ...client.GetOption) error {
			if _, ok := o.(*corev1.Secret); ok {
				reads++
			}
			return c.Get(ctx, key, o, opts...)
		},
	}), nil)
	key := &v1beta1.APIKey{PrivateKey: v1beta1.SecretKeySource{Namespace: "keys", SecretKeyRef: v1beta1.SecretKeyRef{Name: "key", Key: "pem"}}}
	read := func() {
		t.Helper()
		if _, err := r.secrets.Credentials(ctx, "gone", key); err != nil {
			t.Fatal(err)
		}
	}
	read()
	read()
	if reads != 1 {
		t.Fatalf("%d Secret reads for two reads of an unchanged key, want 1", reads)
	}
	if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKey{Name: "gone"}}); err != nil {
		t.Fatal(err)
	}
	read()
	if reads != 2 {
		t.Fatalf("%d Secret reads after the resource was gone, want the value read again (2)", reads)
	}
}

// Every field of the Reconciler that keeps something per resource (it has
// a Forget) is among its stores, so a resource that is gone is forgotten
// everywhere, and a store added later cannot be missed.
func TestEveryStoreForgetsAGoneResource(t *testing.T) {
	r := unitReconciler(t, nil)
	listed := map[uintptr]bool{}
	for _, s := range r.stores() {
		if v := reflect.ValueOf(s); v.Kind() == reflect.Pointer {
			listed[v.Pointer()] = true
		}
	}
	forgets := reflect.TypeFor[forgetter]()
	v := reflect.ValueOf(r).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		if f.Kind() != reflect.Pointer {
			f = f.Addr()
		}
		if f.Type().Implements(forgets) && !f.IsNil() && !listed[f.Pointer()] {
			t.Errorf("Reconciler.%s keeps something per resource (it has Forget), but stores() does not list it", v.Type().Field(i).Name)
		}
	}
}

// A resource that is gone leaves no series behind: its gauges go with it,
// another resource's stay.
func TestGoneResourceLeavesNoSeries(t *testing.T) {
	r := unitReconciler(t, nil)
	for _, name := range []string{"gone", "kept"} {
		metrics.BackendsRegistered.WithLabelValues(name, "api").Set(1)
		metrics.BackendLimitUsed.WithLabelValues(name, "api").Set(0.5)
	}
	r.forget("gone")
	for _, g := range []*prometheus.GaugeVec{metrics.BackendsRegistered, metrics.BackendLimitUsed} {
		if g.DeleteLabelValues("gone", "api") {
			t.Errorf("a series of the gone resource is left")
		}
		if !g.DeleteLabelValues("kept", "api") {
			t.Errorf("the series of another resource went too")
		}
	}
}
