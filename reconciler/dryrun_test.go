package reconciler

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/reconciler/metrics"
	"github.com/peppy-ratio/lbregistrar/reconciler/oci"
	"github.com/peppy-ratio/lbregistrar/reconciler/plan"
	"github.com/peppy-ratio/lbregistrar/reconciler/preview"
)

// backendSets is OCI as far as planning goes: backend sets by name, any
// load balancer; a write fails the test.
type backendSets struct {
	t    *testing.T
	sets map[string][]plan.Backend
}

func (f backendSets) GetBackendSet(_ context.Context, lb, name string) (*oci.BackendSet, error) {
	backends, ok := f.sets[name]
	if !ok {
		return nil, &oci.Error{Op: "GetBackendSet", Status: 404, Code: "NotFound", Err: errors.New("no such backend set")}
	}
	return &oci.BackendSet{LoadBalancerID: lb, Name: name, Backends: backends}, nil
}

func (f backendSets) UpdateBackendSet(_ context.Context, bs *oci.BackendSet, _ []plan.Backend, _ string) (string, error) {
	f.t.Errorf("UpdateBackendSet of %s", bs.Name)
	return "", errors.New("no writes here")
}

func (f backendSets) WaitWorkRequest(context.Context, string, string) error { return nil }

func (f backendSets) WorkRequests(context.Context, string) ([]oci.WorkRequest, error) {
	return nil, nil
}

func (f backendSets) WorkRequestsSince(context.Context, string, time.Time) ([]oci.WorkRequest, error) {
	return nil, nil
}

func (f backendSets) PrivateIPs(context.Context, string, []netip.Addr) (oci.PrivateIPs, error) {
	return nil, nil
}

func (f backendSets) GetBackendSetHealth(context.Context, string, string) (*oci.BackendSetHealth, error) {
	return &oci.BackendSetHealth{Status: "OK"}, nil
}

// serve --dry-run and lbregistrar plan decide and plan alike, over claims
// (web belongs to the older resource), a backend set the spec dropped
// (owned backends go), a missing one and adoption; the dry run writes
// nothing to OCI, records no ownership and adds no finalizer, and reports
// each write it would make as an Event, a gauge and the Ready condition.
func TestDryRunDoesNotWriteWhatPlanShows(t *testing.T) {
	const lb = "ocid1.loadbalancer.oc1.iad.dryrun"
	key := &v1beta1.APIKey{PrivateKey: v1beta1.SecretKeySource{Namespace: "keys", SecretKeyRef: v1beta1.SecretKeyRef{Name: "key", Key: "pem"}}}
	older := &v1beta1.LBRegistrar{
		ObjectMeta: metav1.ObjectMeta{Name: "older", CreationTimestamp: metav1.NewTime(time.Unix(10, 0))},
		Spec: v1beta1.LBRegistrarSpec{LoadBalancerID: lb, APIKey: key, Services: []v1beta1.Target{
			{NodePort: 30080, BackendSetName: "api", Weight: 1}, {NodePort: 30443, BackendSetName: "web", Weight: 2}}},
		Status: v1beta1.LBRegistrarStatus{LoadBalancerID: lb, BackendSets: []v1beta1.BackendSetStatus{
			{Name: "dropped", Backends: v1beta1.GroupBackends([]v1beta1.Backend{{IP: "10.0.0.1", Port: 31000, Weight: 1}})}}},
	}
	newer := &v1beta1.LBRegistrar{
		ObjectMeta: metav1.ObjectMeta{Name: "newer", CreationTimestamp: metav1.NewTime(time.Unix(20, 0))},
		Spec: v1beta1.LBRegistrarSpec{LoadBalancerID: lb, APIKey: key, Services: []v1beta1.Target{
			{NodePort: 30443, BackendSetName: "web", Weight: 1}, {NodePort: 30090, BackendSetName: "missing", Weight: 1}}},
	}
	node := func(name, ip string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}}}}
	}
	ociClient := backendSets{t, map[string][]plan.Backend{
		"api":     {{IP: "10.0.0.1", Port: 30080, Weight: 1}, {IP: "192.168.9.9", Port: 80, Weight: 1}},
		"web":     {{IP: "10.0.0.1", Port: 30443, Weight: 1}, {IP: "10.0.0.2", Port: 30443, Weight: 2}},
		"dropped": {{IP: "10.0.0.1", Port: 31000, Weight: 1}},
	}}
	r := unitReconciler(t, ociClient, older, newer, node("node-a", "10.0.0.1"), node("node-b", "10.0.0.2"),
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "keys", Name: "key"}, Data: map[string][]byte{"pem": []byte("key")}})
	r.opts.DryRun = true
	ctx := context.Background()

	var planned []preview.BackendSetChange
	planner := newPlanner(r.client, r.builders.Key, r.opts, nil)
	all := []v1beta1.LBRegistrar{*older, *newer}
	for _, obj := range all {
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(&obj)}); err != nil {
			t.Fatalf("reconcile %s: %v", obj.Name, err)
		}
		r.flights.Wait()
		rp, err := planner.Plan(ctx, &obj, all)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range rp.BackendSets {
			if c.Changed() {
				planned = append(planned, c)
			}
		}
	}

	want := []preview.BackendSetChange{
		{LBRegistrar: "older", LoadBalancerID: lb, BackendSet: "api", Mode: "apply", Added: []preview.BackendWeight{{Backend: "10.0.0.2:30080", Weight: 1}},
			Kept: []preview.KeptBackend{{Backend: "10.0.0.1:30080", Weight: 1}, {Backend: "192.168.9.9:80", Weight: 1, Foreign: true}}},
		{LBRegistrar: "older", LoadBalancerID: lb, BackendSet: "dropped", Mode: "retire", Removed: []preview.BackendWeight{{Backend: "10.0.0.1:31000", Weight: 1}}},
		{LBRegistrar: "older", LoadBalancerID: lb, BackendSet: "web", Mode: "apply",
			Reweighted: []preview.Reweighted{{Backend: "10.0.0.1:30443", From: 1, To: 2}}, Kept: []preview.KeptBackend{{Backend: "10.0.0.2:30443", Weight: 2}}},
	}
	if diff := cmp.Diff(want, r.pending.Snapshot()); diff != "" {
		t.Errorf("writes the dry run would make (-want +got):\n%s", diff)
	}
	slices.SortFunc(planned, func(a, b preview.BackendSetChange) int { return strings.Compare(a.BackendSet, b.BackendSet) })
	if diff := cmp.Diff(want, planned); diff != "" {
		t.Errorf("writes the plan shows (-want +got):\n%s", diff)
	}
	var gauge dto.Metric
	if err := metrics.PendingWrites.WithLabelValues(lb, "api").Write(&gauge); err != nil || gauge.GetGauge().GetValue() != 1 {
		t.Errorf("lbregistrar_pending_writes of api = %v (%v), want 1", gauge.GetGauge().GetValue(), err)
	}

	var got v1beta1.LBRegistrar
	if err := r.client.Get(ctx, client.ObjectKeyFromObject(older), &got); err != nil {
		t.Fatal(err)
	}
	ready := meta.FindStatusCondition(got.Status.Conditions, v1beta1.ConditionReady)
	if ready == nil || ready.Reason != v1beta1.ReasonDryRun || !strings.Contains(ready.Message, `backend set "api": add 10.0.0.2:30080 weight 1`) {
		t.Errorf("older's Ready = %+v, want reason DryRun naming the pending write", ready)
	}
	if len(got.Finalizers) != 0 || !cmp.Equal(got.Status.BackendSets, older.Status.BackendSets) {
		t.Errorf("older: finalizers %v, ownership record %+v; want none added and the record as it was", got.Finalizers, got.Status.BackendSets)
	}
	if err := r.client.Get(ctx, client.ObjectKeyFromObject(newer), &got); err != nil {
		t.Fatal(err)
	}
	for typ, reason := range map[string]string{v1beta1.ConditionConflict: v1beta1.ReasonClaimed, v1beta1.ConditionReady: v1beta1.ReasonBackendSetNotFound} {
		if c := meta.FindStatusCondition(got.Status.Conditions, typ); c == nil || c.Reason != reason {
			t.Errorf("newer's %s = %+v, want reason %s", typ, c, reason)
		}
	}

	recorder := r.events.(*events.FakeRecorder)
	var notes []string
	for len(recorder.Events) > 0 {
		notes = append(notes, <-recorder.Events)
	}
	if len(notes) != len(want) || !strings.HasPrefix(notes[0], "Normal DryRun dry run, not written: backend set") {
		t.Errorf("events %q, want one DryRun event per write it would make", notes)
	}
}

// Unrecorded lists the backends no resource of the cluster records, with a
// record it signed, and that are none of its nodes: a node's backend, one
// another resource records and one a forged record names are left out.
func TestUnrecordedBackends(t *testing.T) {
	const lb = "ocid1.loadbalancer.oc1.iad.orphans"
	recording := &v1beta1.LBRegistrar{ObjectMeta: metav1.ObjectMeta{Name: "recording"},
		Status: v1beta1.LBRegistrarStatus{LoadBalancerID: lb, BackendSets: []v1beta1.BackendSetStatus{
			{Name: "web", Backends: v1beta1.GroupBackends([]v1beta1.Backend{{IP: "10.9.0.5", Port: 30443, Weight: 1}})}}}}
	forged := &v1beta1.LBRegistrar{ObjectMeta: metav1.ObjectMeta{Name: "forged"},
		Status: v1beta1.LBRegistrarStatus{LoadBalancerID: lb, BackendSets: []v1beta1.BackendSetStatus{
			{Name: "web", Backends: v1beta1.GroupBackends([]v1beta1.Backend{{IP: "192.168.1.7", Port: 8080, Weight: 1}})}}}}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Spec: corev1.NodeSpec{ProviderID: "oci://ocid1.instance.oc1.iad.mine"},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}}}}
	r := unitReconciler(t, nil, recording, node)
	forged.Status.RecordSignature = "v1.not-the-controllers"
	planner := newPlanner(r.client, r.builders.Key, r.opts, nil)
	kept := func(backend string, foreign bool) preview.KeptBackend {
		return preview.KeptBackend{Backend: backend, Weight: 1, Foreign: foreign}
	}
	plans := []ResourcePlan{{LBRegistrar: "a", LoadBalancerID: lb, BackendSets: []preview.BackendSetChange{{LoadBalancerID: lb, BackendSet: "web", Kept: []preview.KeptBackend{
		kept("10.0.0.1:30443", false),                             // its own
		kept("10.0.0.1:8080", true),                               // a node's, at another port
		kept("instance ocid1.instance.oc1.iad.mine:30443", true),  // a node's, by instance
		kept("10.9.0.5:30443", true),                              // recorded by another resource
		kept("192.168.1.7:8080", true),                            // named only by a forged record
		kept("[fd00::9]:30443", true),                             // nobody's
		kept("instance ocid1.instance.oc1.iad.other:30443", true), // nobody's
	}}}}}
	got, err := planner.Unrecorded(context.Background(), plans, []v1beta1.LBRegistrar{*recording, *forged})
	if err != nil {
		t.Fatal(err)
	}
	want := []Unrecorded{
		{LoadBalancerID: lb, BackendSet: "web", Backend: "192.168.1.7:8080", Weight: 1},
		{LoadBalancerID: lb, BackendSet: "web", Backend: "[fd00::9]:30443", Weight: 1},
		{LoadBalancerID: lb, BackendSet: "web", Backend: "instance ocid1.instance.oc1.iad.other:30443", Weight: 1},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("unrecorded (-want +got):\n%s", diff)
	}
}

// plan --delete shows what deleting a resource would do: its own backends
// drained for the drain period and then removed, others' kept; nothing
// when its deletionPolicy is Orphan or it is suspended.
func TestPlanDeletion(t *testing.T) {
	const lb = "ocid1.loadbalancer.oc1.iad.plandelete"
	key := &v1beta1.APIKey{PrivateKey: v1beta1.SecretKeySource{Namespace: "keys", SecretKeyRef: v1beta1.SecretKeyRef{Name: "key", Key: "pem"}}}
	obj := &v1beta1.LBRegistrar{
		ObjectMeta: metav1.ObjectMeta{Name: "retiring"},
		Spec:       v1beta1.LBRegistrarSpec{LoadBalancerID: lb, APIKey: key, Services: []v1beta1.Target{{NodePort: 30080, BackendSetName: "api", Weight: 1}}},
		Status: v1beta1.LBRegistrarStatus{LoadBalancerID: lb, BackendSets: []v1beta1.BackendSetStatus{
			{Name: "api", Backends: v1beta1.GroupBackends([]v1beta1.Backend{{IP: "10.0.0.1", Port: 30080, Weight: 1}})}}},
	}
	ociClient := backendSets{t, map[string][]plan.Backend{
		"api": {{IP: "10.0.0.1", Port: 30080, Weight: 1}, {IP: "192.168.9.9", Port: 80, Weight: 1}},
	}}
	r := unitReconciler(t, ociClient, obj, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "keys", Name: "key"}, Data: map[string][]byte{"pem": []byte("key")}})
	planner := newPlanner(r.client, r.builders.Key, r.opts, nil)
	ctx := context.Background()

	rp, err := planner.PlanDeletion(ctx, obj, []v1beta1.LBRegistrar{*obj})
	if err != nil {
		t.Fatal(err)
	}
	want := []preview.BackendSetChange{{LBRegistrar: "retiring", LoadBalancerID: lb, BackendSet: "api", Mode: "remove",
		Removed: []preview.BackendWeight{{Backend: "10.0.0.1:30080", Weight: 1}}, Kept: []preview.KeptBackend{{Backend: "192.168.9.9:80", Weight: 1, Foreign: true}}}}
	if diff := cmp.Diff(want, rp.BackendSets); diff != "" || rp.Deletion != fmt.Sprintf("drained for %s, then removed", r.opts.DrainPeriod) {
		t.Errorf("deletion %q, backend sets (-want +got):\n%s", rp.Deletion, diff)
	}

	for why, change := range map[string]func(*v1beta1.LBRegistrar){
		"kept: its deletionPolicy is Orphan": func(o *v1beta1.LBRegistrar) { o.Spec.DeletionPolicy = v1beta1.DeletionPolicyOrphan },
		"kept: it is suspended":              func(o *v1beta1.LBRegistrar) { o.Spec.Suspend = true },
	} {
		kept := obj.DeepCopy()
		change(kept)
		rp, err := planner.PlanDeletion(ctx, kept, []v1beta1.LBRegistrar{*kept})
		if err != nil {
			t.Fatal(err)
		}
		if rp.Deletion != why || len(rp.BackendSets) != 0 {
			t.Errorf("deletion %q with backend sets %+v, want %q and none", rp.Deletion, rp.BackendSets, why)
		}
	}
}

// lbregistrar plan shows a move from node ports to pods in one backend
// set: the pods added beside the node, then the weights moving.
func TestPlanShowsAMoveFromNodePortsToPods(t *testing.T) {
	const lb = "ocid1.loadbalancer.oc1.iad.planmove"
	key := &v1beta1.APIKey{PrivateKey: v1beta1.SecretKeySource{Namespace: "keys", SecretKeyRef: v1beta1.SecretKeyRef{Name: "key", Key: "pem"}}}
	http := intstr.FromString("http")
	nodes := v1beta1.Target{Name: "web", Namespace: "shop", Port: &http, BackendSetName: "web", Weight: 100}
	pods := nodes
	pods.Weight, pods.TargetType = 1, v1beta1.TargetTypePod
	obj := &v1beta1.LBRegistrar{
		ObjectMeta: metav1.ObjectMeta{Name: "move"},
		Spec:       v1beta1.LBRegistrarSpec{LoadBalancerID: lb, APIKey: key, Services: []v1beta1.Target{nodes, pods}},
		Status: v1beta1.LBRegistrarStatus{LoadBalancerID: lb, BackendSets: []v1beta1.BackendSetStatus{
			{Name: "web", Backends: v1beta1.GroupBackends([]v1beta1.Backend{{IP: "10.0.0.1", Port: 30080, Weight: 100}})}}},
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}, Spec: corev1.ServiceSpec{
		Type: corev1.ServiceTypeNodePort, Ports: []corev1.ServicePort{{Name: "http", Port: 80, NodePort: 30080}}}}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "shop", Name: "web-1", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080)}},
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.1.0.7"}, NodeName: ptr.To("node-a"),
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: "shop", Name: "web-1"}}},
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}, Status: corev1.NodeStatus{
		Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}}}}
	ociClient := backendSets{t, map[string][]plan.Backend{"web": {{IP: "10.0.0.1", Port: 30080, Weight: 100}}}}
	r := unitReconciler(t, ociClient, obj, svc, slice, node,
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "keys", Name: "key"}, Data: map[string][]byte{"pem": []byte("key")}})
	planner := newPlanner(r.client, r.builders.Key, r.opts, nil)

	rp, err := planner.Plan(context.Background(), obj, []v1beta1.LBRegistrar{*obj})
	if err != nil {
		t.Fatal(err)
	}
	want := []preview.BackendSetChange{{LBRegistrar: "move", LoadBalancerID: lb, BackendSet: "web", Mode: "apply",
		Added: []preview.BackendWeight{{Backend: "10.1.0.7:8080", Weight: 1}},
		Kept:  []preview.KeptBackend{{Backend: "10.0.0.1:30080", Weight: 100}}}}
	if diff := cmp.Diff(want, rp.BackendSets); diff != "" {
		t.Errorf("pods added (-want +got):\n%s", diff)
	}

	ociClient.sets["web"] = append(ociClient.sets["web"], plan.Backend{IP: "10.1.0.7", Port: 8080, Weight: 1})
	moved := obj.DeepCopy()
	moved.Spec.Services[0].Weight, moved.Spec.Services[1].Weight = 1, 100
	moved.Status.BackendSets[0].Backends = v1beta1.GroupBackends([]v1beta1.Backend{{IP: "10.0.0.1", Port: 30080, Weight: 100}, {IP: "10.1.0.7", Port: 8080, Weight: 1}})
	signRecord(moved) // the pod's backend is this resource's: it added it
	rp, err = planner.Plan(context.Background(), moved, []v1beta1.LBRegistrar{*moved})
	if err != nil {
		t.Fatal(err)
	}
	want = []preview.BackendSetChange{{LBRegistrar: "move", LoadBalancerID: lb, BackendSet: "web", Mode: "apply",
		Reweighted: []preview.Reweighted{{Backend: "10.0.0.1:30080", From: 100, To: 1}, {Backend: "10.1.0.7:8080", From: 1, To: 100}}}}
	if diff := cmp.Diff(want, rp.BackendSets); diff != "" {
		t.Errorf("weight moved (-want +got):\n%s", diff)
	}
}
