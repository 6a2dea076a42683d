package reconciler_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/api/validation"
	"github.com/peppy-ratio/lbregistrar/reconciler"
	"github.com/peppy-ratio/lbregistrar/reconciler/metrics"
	"github.com/peppy-ratio/lbregistrar/test/ociemu"
)

// settings is every setting of a backend set except its backends, as JSON.
func (f *fixture) settings(lb, set string) string {
	f.t.Helper()
	st := f.emu.State()
	for _, l := range st.LoadBalancers {
		if *l.Id == lb {
			bs := l.BackendSets[set]
			bs.Backends = nil
			raw, _ := json.Marshal(bs)
			return string(raw)
		}
	}
	for _, l := range st.NetworkLoadBalancers {
		if *l.Id == lb {
			bs := l.BackendSets[set]
			bs.Backends = nil
			raw, _ := json.Marshal(bs)
			return string(raw)
		}
	}
	f.t.Fatalf("no load balancer %s", lb)
	return ""
}

func TestNodesAddedRemovedRelabelledExcluded(t *testing.T) {
	f := newFixture(t, ociemu.Options{WorkRequestLatency: 20 * time.Millisecond})
	before := f.settings(classicLB, "web")
	f.node(f.ns+"-a", "10.0.0.1")
	f.node(f.ns+"-b", "10.0.0.2")
	f.startManager(f.options())
	obj := f.registrar("web", classicLB, []v1beta1.Target{fixedPort("web", 30080)})
	foreign := "192.168.9.9:8080/3,backup"

	f.expectBackends(classicLB, "web", foreign, "10.0.0.1:30080/1", "10.0.0.2:30080/1")
	f.waitReady(obj, v1beta1.ReasonRegistered, func(o *v1beta1.LBRegistrar, _ *metav1.Condition) error {
		if o.Status.ObservedGeneration != o.Generation {
			return fmt.Errorf("status of generation %d, want %d", o.Status.ObservedGeneration, o.Generation)
		}
		if len(o.Status.BackendSets) != 1 || o.Status.BackendSets[0].OwnedCount() != 2 || o.Status.BackendSets[0].LastWorkRequest == nil {
			return fmt.Errorf("ownership record: %+v", o.Status.BackendSets)
		}
		return nil
	})

	f.eventually(10*time.Second, func() error {
		var evs eventsv1.EventList
		f.must(k8s.List(f.ctx, &evs, client.InNamespace(metav1.NamespaceDefault)))
		for _, e := range evs.Items {
			if e.Regarding.Name == obj.Name && e.Reason == "BackendSetUpdated" && strings.Contains(e.Note, "2 added") {
				return nil
			}
		}
		return fmt.Errorf("no BackendSetUpdated event for %s", obj.Name)
	})

	f.node(f.ns+"-c", "10.0.0.3")
	f.expectBackends(classicLB, "web", foreign, "10.0.0.1:30080/1", "10.0.0.2:30080/1", "10.0.0.3:30080/1")

	f.updateNode(f.ns+"-a", func(n *corev1.Node) { n.Labels[corev1.LabelNodeExcludeBalancers] = "true" })
	f.expectBackends(classicLB, "web", foreign, "10.0.0.2:30080/1", "10.0.0.3:30080/1")

	f.updateNode(f.ns+"-b", func(n *corev1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "ToBeDeletedByClusterAutoscaler", Effect: corev1.TaintEffectNoSchedule})
	})
	f.expectBackends(classicLB, "web", foreign, "10.0.0.3:30080/1")

	f.updateNode(f.ns+"-a", func(n *corev1.Node) { delete(n.Labels, corev1.LabelNodeExcludeBalancers) })
	f.expectBackends(classicLB, "web", foreign, "10.0.0.1:30080/1", "10.0.0.3:30080/1")

	f.must(k8s.Delete(f.ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: f.ns + "-c"}}))
	f.expectBackends(classicLB, "web", foreign, "10.0.0.1:30080/1")

	// A NotReady node stays registered: the health check takes it out.
	f.setNodeReady(f.ns+"-a", corev1.NodeCondition{Status: corev1.ConditionFalse})

	// nodeSelector narrows to labelled nodes.
	f.node(f.ns+"-d", "10.0.0.4", func(n *corev1.Node) { n.Labels["pool"] = "edge" })
	f.expectBackends(classicLB, "web", foreign, "10.0.0.1:30080/1", "10.0.0.4:30080/1")
	f.updateRegistrar(obj, func(o *v1beta1.LBRegistrar) {
		o.Spec.NodeSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"pool": "edge"}}
	})
	f.expectBackends(classicLB, "web", foreign, "10.0.0.4:30080/1")

	if after := f.settings(classicLB, "web"); after != before {
		t.Errorf("backend set settings changed:\nbefore %s\nafter  %s", before, after)
	}
}

func TestEndpointsAndNodePortChanges(t *testing.T) {
	f := newFixture(t, ociemu.Options{WorkRequestLatency: 20 * time.Millisecond})
	for i, n := range []string{"a", "b", "c"} {
		f.node(f.ns+"-"+n, fmt.Sprintf("10.0.1.%d", i+1))
	}
	svc := f.service("gw", corev1.ServicePort{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), NodePort: 30070})
	f.endpoints("gw", f.ns+"-a")
	f.startManager(f.options())
	port := intstr.FromString("http")
	obj := f.registrar("gw", classicLB, []v1beta1.Target{{
		Name: "gw", Namespace: f.ns, Port: &port, FilterByEndpoints: true, BackendSetName: "api", Weight: 2,
	}})
	f.expectBackends(classicLB, "api", "10.0.1.1:30070/2")

	// Endpoints move to b and c.
	f.endpoints("gw", f.ns+"-b", f.ns+"-c")
	f.expectBackends(classicLB, "api", "10.0.1.2:30070/2", "10.0.1.3:30070/2")

	// Zero ready endpoints: nothing is removed, Degraded says why.
	f.endpoints("gw")
	f.eventually(10*time.Second, func() error {
		c := meta.FindStatusCondition(f.get(obj).Status.Conditions, v1beta1.ConditionDegraded)
		if c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "no ready endpoint") {
			return fmt.Errorf("degraded: %+v", c)
		}
		return nil
	})
	f.expectBackends(classicLB, "api", "10.0.1.2:30070/2", "10.0.1.3:30070/2")
	f.endpoints("gw", f.ns+"-c")
	f.expectBackends(classicLB, "api", "10.0.1.3:30070/2")

	// The Service's NodePort changes.
	f.must(k8s.Get(f.ctx, client.ObjectKeyFromObject(svc), svc))
	svc.Spec.Ports[0].NodePort = 30071
	f.must(k8s.Update(f.ctx, svc))
	f.expectBackends(classicLB, "api", "10.0.1.3:30071/2")

	// externalTrafficPolicy: Local narrows without filterByEndpoints.
	f.updateRegistrar(obj, func(o *v1beta1.LBRegistrar) { o.Spec.Services[0].FilterByEndpoints = false })
	f.expectBackends(classicLB, "api", "10.0.1.1:30071/2", "10.0.1.2:30071/2", "10.0.1.3:30071/2")
	f.must(k8s.Get(f.ctx, client.ObjectKeyFromObject(svc), svc))
	svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	f.must(k8s.Update(f.ctx, svc))
	f.expectBackends(classicLB, "api", "10.0.1.3:30071/2")
}

func TestDeletionDrainsThenRemovesOnlyOwned(t *testing.T) {
	f := newFixture(t, ociemu.Options{WorkRequestLatency: 10 * time.Millisecond})
	f.node(f.ns+"-a", "10.0.2.1")
	o := f.options()
	o.DrainPeriod = 1500 * time.Millisecond
	f.startManager(o)
	obj := f.registrar("nlb", networkLB, []v1beta1.Target{fixedPort("tcp", 30080)})
	foreign := []string{"192.168.9.9:30080/2,offline", "ocid1.instance.oc1.iad.someoneelse:30080/1"}
	f.expectBackends(networkLB, "tcp", append(foreign, "10.0.2.1:30080/1")...)
	before := f.settings(networkLB, "tcp")

	f.must(k8s.Delete(f.ctx, obj))
	f.expectBackends(networkLB, "tcp", append(foreign, "10.0.2.1:30080/1,drain")...)
	f.expectBackends(networkLB, "tcp", foreign...)
	f.eventually(10*time.Second, func() error {
		if err := k8s.Get(f.ctx, client.ObjectKeyFromObject(obj), &v1beta1.LBRegistrar{}); err == nil {
			return fmt.Errorf("still present")
		}
		return nil
	})
	if after := f.settings(networkLB, "tcp"); after != before {
		t.Errorf("backend set settings changed:\nbefore %s\nafter  %s", before, after)
	}
}

// Contract row X2 (docs/migration.md): a backend set that does not exist
// gets no write and Ready=False naming it; deleting the resource completes.
func TestDeletionWithMissingBackendSetCompletes(t *testing.T) {
	f := newFixture(t, ociemu.Options{})
	f.node(f.ns+"-a", "10.0.3.1")
	f.startManager(f.options())
	obj := f.registrar("gone", classicLB, []v1beta1.Target{fixedPort("no-such-set", 30080)})
	f.eventually(10*time.Second, func() error {
		c := meta.FindStatusCondition(f.get(obj).Status.Conditions, v1beta1.ConditionReady)
		if c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "not found") {
			return fmt.Errorf("ready: %+v", c)
		}
		return nil
	})
	// Pretend it had registered there before the backend set went away.
	cur := f.get(obj)
	cur.Status.BackendSets = []v1beta1.BackendSetStatus{{Name: "no-such-set", Backends: v1beta1.GroupBackends([]v1beta1.Backend{{IP: "10.0.3.1", Port: 30080, Weight: 1}})}}
	f.must(k8s.Status().Update(f.ctx, cur))
	f.must(k8s.Delete(f.ctx, obj))
	f.eventually(10*time.Second, func() error {
		if err := k8s.Get(f.ctx, client.ObjectKeyFromObject(obj), &v1beta1.LBRegistrar{}); err == nil {
			return fmt.Errorf("still present")
		}
		return nil
	})
}

// Deleting a resource with nothing of its own left in OCI does not wait out
// the drain period: one whose record lists no backend, and one whose
// backends another resource now records (what lbregistrar migrate leaves
// behind when it merges resources).
func TestDeletionWithNothingToDrainDoesNotWait(t *testing.T) {
	f := newFixture(t, ociemu.Options{})
	f.node(f.ns+"-a", "10.0.18.1")
	o := f.options()
	o.DrainPeriod = time.Hour
	_, stop := f.startManager(o)
	gone := func(obj *v1beta1.LBRegistrar) func() error {
		return func() error {
			if err := k8s.Get(f.ctx, client.ObjectKeyFromObject(obj), &v1beta1.LBRegistrar{}); err == nil {
				return fmt.Errorf("%s still present", obj.Name)
			}
			return nil
		}
	}

	nothing := f.registrar("nothing", classicLB, []v1beta1.Target{fixedPort("no-such-set", 30020)})
	f.eventually(10*time.Second, func() error {
		if c := meta.FindStatusCondition(f.get(nothing).Status.Conditions, v1beta1.ConditionReady); c == nil || c.Status != metav1.ConditionFalse {
			return fmt.Errorf("ready: %+v", c)
		}
		return nil
	})
	cur := f.get(nothing)
	cur.Status.BackendSets = []v1beta1.BackendSetStatus{{Name: "no-such-set"}}
	f.must(k8s.Status().Update(f.ctx, cur))
	f.must(k8s.Delete(f.ctx, nothing))
	f.eventually(20*time.Second, gone(nothing))

	old := f.registrar("old", classicLB, []v1beta1.Target{fixedPort("api", 30021)})
	f.expectBackends(classicLB, "api", "10.0.18.1:30021/1")
	merged := f.registrar("merged", classicLB, []v1beta1.Target{fixedPort("api", 30021)}, func(o *v1beta1.LBRegistrar) {
		o.Annotations = map[string]string{validation.ReplacesAnnotation: old.Name}
	})
	f.waitReady(merged, v1beta1.ReasonRegistered, func(o *v1beta1.LBRegistrar, _ *metav1.Condition) error {
		if len(o.Status.BackendSets) != 1 {
			return fmt.Errorf("merged ownership record: %+v", o.Status.BackendSets)
		}
		return nil
	})
	f.must(k8s.Delete(f.ctx, old))
	f.eventually(20*time.Second, gone(old))
	f.expectBackends(classicLB, "api", "10.0.18.1:30021/1")
	if n := f.emu.Counters().Writes[classicLB]; n != 1 {
		t.Fatalf("%d writes to the load balancer, want 1 (the first registration)", n)
	}

	// merged does own backends, which would drain for the hour: it goes
	// without its finalizer, so the next test finds a clean cluster.
	stop()
	cur = f.get(merged)
	cur.Finalizers = nil
	f.must(k8s.Update(f.ctx, cur))
	f.must(k8s.Delete(f.ctx, cur))
}

func TestTwoResourcesOneLoadBalancerNeverConflict(t *testing.T) {
	f := newFixture(t, ociemu.Options{WorkRequestLatency: 150 * time.Millisecond})
	for i := range 3 {
		f.node(fmt.Sprintf("%s-%d", f.ns, i), fmt.Sprintf("10.0.4.%d", i+1))
	}
	f.startManager(f.options())
	f.registrar("one", classicLB, []v1beta1.Target{fixedPort("api", 30443)})
	f.registrar("two", classicLB, []v1beta1.Target{fixedPort("admin", 30444)})
	f.expectBackends(classicLB, "api", "10.0.4.1:30443/1", "10.0.4.2:30443/1", "10.0.4.3:30443/1")
	f.expectBackends(classicLB, "admin", "10.0.4.1:30444/1", "10.0.4.2:30444/1", "10.0.4.3:30444/1")
	f.node(f.ns+"-x", "10.0.4.9")
	f.expectBackends(classicLB, "api", "10.0.4.1:30443/1", "10.0.4.2:30443/1", "10.0.4.3:30443/1", "10.0.4.9:30443/1")
	f.expectBackends(classicLB, "admin", "10.0.4.1:30444/1", "10.0.4.2:30444/1", "10.0.4.3:30444/1", "10.0.4.9:30444/1")
	if c := f.emu.Counters(); c.Conflicts != 0 {
		t.Fatalf("the emulator answered %d writes with 409", c.Conflicts)
	}
}

func TestLaterClaimGetsConflictAndWritesNothing(t *testing.T) {
	f := newFixture(t, ociemu.Options{})
	f.node(f.ns+"-a", "10.0.5.1")
	f.startManager(f.options())
	first := f.registrar("first", classicLB, []v1beta1.Target{fixedPort("api", 30001)})
	f.expectBackends(classicLB, "api", "10.0.5.1:30001/1")
	f.waitServerClockPast(first.CreationTimestamp)
	second := f.registrar("second", classicLB, []v1beta1.Target{fixedPort("api", 30002)})
	if !first.CreationTimestamp.Before(&second.CreationTimestamp) {
		t.Fatalf("second created at %s, not after first (%s)", second.CreationTimestamp, first.CreationTimestamp)
	}
	f.expectConflict(second, first.Name)
	f.expectBackends(classicLB, "api", "10.0.5.1:30001/1")

	// A replacement takes the claim over and adopts what is registered; the
	// replaced resource's deletion leaves the adopted backends alone.
	repl := f.registrar("repl", classicLB, []v1beta1.Target{fixedPort("api", 30001)}, func(o *v1beta1.LBRegistrar) {
		o.Annotations = map[string]string{validation.ReplacesAnnotation: first.Name}
	})
	f.waitReady(repl, v1beta1.ReasonRegistered, func(o *v1beta1.LBRegistrar, _ *metav1.Condition) error {
		if len(o.Status.BackendSets) != 1 {
			return fmt.Errorf("replacement ownership record: %+v", o.Status.BackendSets)
		}
		return nil
	})
	f.must(k8s.Delete(f.ctx, second))
	f.must(k8s.Delete(f.ctx, first))
	f.eventually(10*time.Second, func() error {
		if err := k8s.Get(f.ctx, client.ObjectKeyFromObject(first), &v1beta1.LBRegistrar{}); err == nil {
			return fmt.Errorf("first still present")
		}
		return nil
	})
	f.expectBackends(classicLB, "api", "10.0.5.1:30001/1")
	if n := f.emu.Counters().Writes[classicLB]; n != 1 {
		t.Fatalf("%d writes to the load balancer, want 1 (the first registration)", n)
	}
}

func TestBackendSetMoveCleansUpOldRegistration(t *testing.T) {
	f := newFixture(t, ociemu.Options{})
	f.node(f.ns+"-a", "10.0.6.1")
	f.startManager(f.options())
	obj := f.registrar("mv", classicLB, []v1beta1.Target{fixedPort("api", 30010)})
	f.expectBackends(classicLB, "api", "10.0.6.1:30010/1")
	f.updateRegistrar(obj, func(o *v1beta1.LBRegistrar) { o.Spec.Services[0].BackendSetName = "admin" })
	f.expectBackends(classicLB, "admin", "10.0.6.1:30010/1")
	f.expectBackends(classicLB, "api")
	f.eventually(10*time.Second, func() error {
		if bs := f.get(obj).Status.BackendSets; len(bs) != 1 || bs[0].Name != "admin" {
			return fmt.Errorf("record: %+v", bs)
		}
		return nil
	})
}

func TestSecretRotationAndBadKey(t *testing.T) {
	f := newFixture(t, ociemu.Options{})
	f.node(f.ns+"-a", "10.0.7.1")
	f.applySecret("oci-key", []byte("-----BEGIN RSA PRIVATE KEY-----\nbm90IGEga2V5\n-----END RSA PRIVATE KEY-----\n"))
	o := f.options()
	o.SecretNamespaces = []string{f.ns} // Secrets watched through a cache of their own
	f.startManager(o)
	obj := f.registrar("rot", classicLB, []v1beta1.Target{fixedPort("api", 30020)})

	outside := f.key
	outside.PrivateKey.Namespace = metav1.NamespaceDefault
	elsewhere := f.registrar("elsewhere", networkLB, []v1beta1.Target{fixedPort("tcp", 30021)}, func(o *v1beta1.LBRegistrar) { o.Spec.APIKey = outside.DeepCopy() })
	f.waitReady(elsewhere, v1beta1.ReasonSecretNamespaceNotAllowed, func(_ *v1beta1.LBRegistrar, ready *metav1.Condition) error {
		if !strings.Contains(ready.Message, "--secret-namespaces") {
			return fmt.Errorf("ready: %+v", ready)
		}
		return nil
	})

	f.waitReady(obj, v1beta1.ReasonInvalidCredentials)
	f.applySecret("oci-key", f.keyPEM)
	f.expectBackends(classicLB, "api", "10.0.7.1:30020/1")

	// Rotate to a new key: new Secret content and fingerprint.
	key, _ := f.newKey("oci-key-2")
	f.updateRegistrar(obj, func(o *v1beta1.LBRegistrar) { o.Spec.APIKey = key.DeepCopy() })
	f.node(f.ns+"-b", "10.0.7.2")
	f.expectBackends(classicLB, "api", "10.0.7.1:30020/1", "10.0.7.2:30020/1")
	for _, c := range f.emu.Calls() {
		if c.AuthError != "" {
			t.Fatalf("a request was rejected: %+v", c)
		}
	}
}

// Conditions are read by anyone who may read LBRegistrars, so they do not
// tell a missing Secret from an existing one without the key: a reference
// probes nothing the spec does not already say.
func TestCredentialConditionsDoNotRevealSecrets(t *testing.T) {
	f := newFixture(t, ociemu.Options{})
	f.startManager(f.options())
	ref := func(secret string) func(*v1beta1.LBRegistrar) {
		return func(o *v1beta1.LBRegistrar) {
			o.Spec.APIKey.PrivateKey.SecretKeyRef = v1beta1.SecretKeyRef{Name: secret, Key: "no-such-key"}
		}
	}
	absent := f.registrar("absent", classicLB, []v1beta1.Target{fixedPort("api", 30030)}, ref("no-such-secret"))
	present := f.registrar("present", networkLB, []v1beta1.Target{fixedPort("tcp", 30031)}, ref("oci-key"))
	ready := func(o *v1beta1.LBRegistrar) *metav1.Condition {
		var c *metav1.Condition
		f.eventually(10*time.Second, func() error {
			if c = meta.FindStatusCondition(f.get(o).Status.Conditions, v1beta1.ConditionReady); c == nil || c.Status != metav1.ConditionFalse {
				return fmt.Errorf("ready: %+v", c)
			}
			return nil
		})
		return c
	}
	a, p := ready(absent), ready(present)
	if a.Reason != p.Reason || strings.Replace(a.Message, "no-such-secret", "oci-key", 1) != p.Message {
		t.Errorf("a missing Secret and a missing key read differently:\n%s: %s\n%s: %s", a.Reason, a.Message, p.Reason, p.Message)
	}
}

func TestConvergesUnderFaults(t *testing.T) {
	f := newFixture(t, ociemu.Options{WorkRequestLatency: 30 * time.Millisecond})
	for i := range 3 {
		f.node(fmt.Sprintf("%s-%d", f.ns, i), fmt.Sprintf("10.0.8.%d", i+1))
	}
	conflicts, failedWRs := counter(t, metrics.Retries.WithLabelValues("conflict")), counter(t, metrics.Retries.WithLabelValues("workrequest"))
	f.emu.AddFault(ociemu.Fault{Operation: "UpdateBackendSet", Status: 409, Code: "Conflict", Times: 4})
	f.emu.AddFault(ociemu.Fault{Operation: "GetBackendSet", Status: 429, RetryAfter: time.Second, Times: 1})
	f.emu.AddFault(ociemu.Fault{Operation: "GetBackendSet", Status: 503, Times: 3})
	f.emu.AddFault(ociemu.Fault{Operation: "UpdateBackendSet", FailWorkRequest: true, Times: 2})
	f.emu.AddFault(ociemu.Fault{Operation: "GetWorkRequest", Status: 500, Times: 3})
	f.startManager(f.options())
	f.registrar("storm", networkLB, []v1beta1.Target{fixedPort("tcp", 30080)})
	foreign := []string{"192.168.9.9:30080/2,offline", "ocid1.instance.oc1.iad.someoneelse:30080/1"}
	f.expectBackends(networkLB, "tcp", append(foreign, "10.0.8.1:30080/1", "10.0.8.2:30080/1", "10.0.8.3:30080/1")...)

	f.emu.AddFault(ociemu.Fault{Operation: "UpdateBackendSet", Status: 409, Code: "IncorrectState", Times: 3})
	f.emu.AddFault(ociemu.Fault{Operation: "UpdateBackendSet", Status: 502, Times: 2})
	f.must(k8s.Delete(f.ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: f.ns + "-1"}}))
	f.expectBackends(networkLB, "tcp", append(foreign, "10.0.8.1:30080/1", "10.0.8.3:30080/1")...)
	if counter(t, metrics.Retries.WithLabelValues("conflict")) < conflicts+7 || counter(t, metrics.Retries.WithLabelValues("workrequest")) < failedWRs+2 {
		t.Errorf("retries not counted")
	}
}

// counter is the value of a counter, or of a gauge.
func counter(t testing.TB, c prometheus.Metric) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	if m.Gauge != nil {
		return m.GetGauge().GetValue()
	}
	return m.GetCounter().GetValue()
}

func TestOptionsDefaultsAreSane(t *testing.T) {
	o := reconciler.DefaultOptions()
	if o.Workers < 1 || o.Backoff.Attempts < 1 || o.Resync <= 0 || o.CleanupTimeout <= o.DrainPeriod {
		t.Fatalf("defaults: %+v", o)
	}
}

func TestLoadBalancerChangeCleansUpOldRegistration(t *testing.T) {
	f := newFixture(t, ociemu.Options{})
	f.node(f.ns+"-a", "10.0.10.1")
	f.startManager(f.options())
	obj := f.registrar("move-lb", classicLB, []v1beta1.Target{fixedPort("api", 30200)})
	f.expectBackends(classicLB, "api", "10.0.10.1:30200/1")
	f.updateRegistrar(obj, func(o *v1beta1.LBRegistrar) {
		o.Spec.LoadBalancerID = networkLB
		o.Spec.Services = []v1beta1.Target{fixedPort("tcp", 30200)}
	})
	f.expectBackends(classicLB, "api")
	f.expectBackends(networkLB, "tcp", "192.168.9.9:30080/2,offline", "ocid1.instance.oc1.iad.someoneelse:30080/1", "10.0.10.1:30200/1")
	f.eventually(10*time.Second, func() error {
		if st := f.get(obj).Status; st.LoadBalancerID != networkLB || len(st.BackendSets) != 1 || st.BackendSets[0].Name != "tcp" {
			return fmt.Errorf("status: %+v", st)
		}
		return nil
	})
}

func TestServiceWithoutNodePortIsACondition(t *testing.T) {
	f := newFixture(t, ociemu.Options{})
	f.node(f.ns+"-a", "10.0.11.1")
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "lb-only"},
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeLoadBalancer, AllocateLoadBalancerNodePorts: ptr.To(false),
			Ports: []corev1.ServicePort{{Name: "https", Port: 443}}, Selector: map[string]string{"app": "x"},
		},
	}
	f.must(k8s.Create(f.ctx, svc))
	f.startManager(f.options())
	port := intstr.FromString("https")
	obj := f.registrar("no-nodeport", classicLB, []v1beta1.Target{{Name: "lb-only", Namespace: f.ns, Port: &port, BackendSetName: "api", Weight: 1}})
	f.eventually(10*time.Second, func() error {
		o := f.get(obj)
		d, r := meta.FindStatusCondition(o.Status.Conditions, v1beta1.ConditionDegraded), meta.FindStatusCondition(o.Status.Conditions, v1beta1.ConditionReady)
		if d == nil || d.Reason != "NodePortNotAllocated" || r == nil || r.Status != metav1.ConditionFalse {
			return fmt.Errorf("conditions: %+v", o.Status.Conditions)
		}
		return nil
	})
	f.expectBackends(classicLB, "api")
}

// The resync alone repairs a change made outside: the load-balancer watch is
// off, and nothing else the reconciler watches changes, so the drift is seen
// to stay until the resync is due and to be gone soon after.
func TestResyncRepairsDriftMadeOutside(t *testing.T) {
	f := newFixture(t, ociemu.Options{})
	f.node(f.ns+"-a", "10.0.12.1")
	o := f.options()
	o.WatchPeriod = 0          // no lbwatch: the resync is the only way back
	o.Resync = 3 * time.Second // long enough to see the drift first
	f.startManager(o)
	f.registrar("drift", classicLB, []v1beta1.Target{fixedPort("api", 30300)})
	f.expectBackends(classicLB, "api", "10.0.12.1:30300/1")
	registered := f.workRequestsOn(classicLB, "api")
	if len(registered) != 1 || registered[0].TimeFinished.IsZero() {
		t.Fatalf("work requests on backend set api after registering: %+v, want one, ended", registered)
	}

	seed, err := ociemu.LoadSeedFile("testdata/seed.yaml") // the load balancer as it was, without our backend
	f.must(err)
	f.must(f.emu.SeedState(seed))
	// The resync is due no sooner than Resync after the registering work
	// request ended, so the drift is still there to see.
	if got := f.backends(classicLB, "api"); len(got) != 0 {
		t.Fatalf("right after the drift, %v after registering: backend set api has %v, want it empty as seeded",
			time.Since(registered[0].TimeFinished), got)
	}

	// Due at Resync plus up to 10% jitter after the registering flight
	// landed; the rest is one read, one write and its work request.
	bound := o.Resync + o.Resync/10 + 5*time.Second
	f.eventually(bound, func() error {
		if got := f.backends(classicLB, "api"); !slices.Equal(got, []string{"10.0.12.1:30300/1"}) {
			return fmt.Errorf("backend set api: got %v, want the drift repaired", got)
		}
		return nil
	})
	wrs := f.workRequestsOn(classicLB, "api")
	if len(wrs) != 2 {
		t.Fatalf("work requests on backend set api: %+v, want the registration and one repair", wrs)
	}
	// Nothing but the resync: the repair was written no sooner than it was due.
	if gap := wrs[0].TimeAccepted.Sub(registered[0].TimeFinished); gap < o.Resync {
		t.Errorf("repair written %v after the registration ended, before the %v resync was due: something else repaired it", gap, o.Resync)
	}
}

// workRequestsOn are the work requests on a backend set, newest first.
func (f *fixture) workRequestsOn(lb, set string) []ociemu.WorkRequest {
	var out []ociemu.WorkRequest
	for _, wr := range f.emu.WorkRequests() {
		if wr.LoadBalancerID == lb && wr.BackendSet == set {
			out = append(out, wr)
		}
	}
	return out
}

func TestDeletionGivesUpAfterCleanupTimeout(t *testing.T) {
	f := newFixture(t, ociemu.Options{})
	f.node(f.ns+"-a", "10.0.13.1")
	o := f.options()
	o.CleanupTimeout = 2 * time.Second
	f.startManager(o)
	obj := f.registrar("stuck", classicLB, []v1beta1.Target{fixedPort("api", 30400)})
	f.expectBackends(classicLB, "api", "10.0.13.1:30400/1")
	f.must(k8s.Delete(f.ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "oci-key"}}))
	f.must(k8s.Delete(f.ctx, obj))
	f.eventually(15*time.Second, func() error {
		if err := k8s.Get(f.ctx, client.ObjectKeyFromObject(obj), &v1beta1.LBRegistrar{}); err == nil {
			return fmt.Errorf("still present")
		}
		return nil
	})
	f.eventually(5*time.Second, func() error {
		var evs eventsv1.EventList
		f.must(k8s.List(f.ctx, &evs, client.InNamespace(metav1.NamespaceDefault)))
		for _, e := range evs.Items {
			if e.Regarding.Name == obj.Name && e.Reason == "CleanupAbandoned" && strings.Contains(e.Note, "Secret") {
				return nil
			}
		}
		return fmt.Errorf("no CleanupAbandoned event")
	})
	// What could not be removed stays; nothing else was touched.
	f.expectBackends(classicLB, "api", "10.0.13.1:30400/1")
}

// Many resources on one busy load balancer park instead of occupying
// workers, so another load balancer is served meanwhile.
func TestBusyLoadBalancerDoesNotStarveOthers(t *testing.T) {
	f := newFixture(t, ociemu.Options{WorkRequestLatency: 400 * time.Millisecond})
	busy := f.seedBench(1, 5)[0]
	f.node(f.ns+"-a", "10.0.14.1")
	o := f.options()
	o.Workers = 2
	f.startManager(o)
	for s := range 5 {
		f.registrar(fmt.Sprintf("busy-%d", s), busy, []v1beta1.Target{fixedPort(fmt.Sprintf("bs-%d", s), 30500)})
	}
	f.registrar("other", networkLB, []v1beta1.Target{fixedPort("tcp", 30500)})
	f.expectBackends(networkLB, "tcp", "192.168.9.9:30080/2,offline", "ocid1.instance.oc1.iad.someoneelse:30080/1", "10.0.14.1:30500/1")
	if done := f.emu.Counters().Writes[busy]; done >= 5 {
		t.Fatalf("the other load balancer was served only after all %d writes to the busy one", done)
	}
	f.waitRegistered([]string{busy}, 5, "10.0.14.1", true)
	if c := f.emu.Counters(); c.Conflicts != 0 {
		t.Fatalf("%d writes answered 409", c.Conflicts)
	}
}

// A reconcile waiting for work requests occupies no worker: with one
// worker, two load balancers whose work requests OCI keeps in progress do
// not keep a third from being written, and each is written once when they
// finish.
func TestWaitingForWorkRequestsOccupiesNoWorker(t *testing.T) {
	f := newFixture(t, ociemu.Options{WorkRequestLatency: 10 * time.Millisecond})
	lbs := f.seedBench(3, 1)
	f.node(f.ns+"-a", "10.0.17.1")
	var stuck []int
	for _, lb := range lbs[:2] {
		stuck = append(stuck, f.emu.AddFault(ociemu.Fault{Operation: "UpdateBackendSet", LoadBalancerID: lb, StuckUpdating: true, Times: 1}))
	}
	o := f.options()
	o.Workers = 1
	f.startManager(o)
	for i, lb := range lbs[:2] {
		f.registrar(fmt.Sprintf("stuck-%d", i), lb, []v1beta1.Target{fixedPort("bs-0", 30800)})
	}
	f.eventually(10*time.Second, func() error {
		if w := f.writes(lbs[:2]); w != 2 {
			return fmt.Errorf("%d of the 2 stuck load balancers written", w)
		}
		return nil
	})
	f.registrar("free", lbs[2], []v1beta1.Target{fixedPort("bs-0", 30800)})
	f.waitRegistered(lbs[2:], 1, "10.0.17.1", true)
	if f.registered(lbs[:2], 1, "10.0.17.1", true) {
		t.Fatal("the stuck work requests finished before the fault was removed")
	}
	for _, id := range stuck {
		f.emu.RemoveFault(id)
	}
	f.waitRegistered(lbs, 1, "10.0.17.1", true)
	if w, c := f.writes(lbs), f.emu.Counters().Conflicts; w != 3 || c != 0 {
		t.Fatalf("%d writes, %d answered 409; want 3 and 0", w, c)
	}
}

// Node events that arrive while a work request runs go into one next write.
func TestChangesDuringAWorkRequestAreCoalesced(t *testing.T) {
	f := newFixture(t, ociemu.Options{WorkRequestLatency: time.Hour}) // finished by hand
	f.node(f.ns+"-0", "10.0.16.100")
	mgr, _ := f.startManager(f.options())
	obj := f.registrar("coalesce", classicLB, []v1beta1.Target{fixedPort("api", 30700)})
	f.eventually(10*time.Second, func() error {
		if f.emu.Counters().Writes[classicLB] != 1 {
			return fmt.Errorf("first write not accepted yet")
		}
		return nil
	})
	want := []string{"10.0.16.100:30700/1"}
	for i := range 20 {
		ip := fmt.Sprintf("10.0.16.%d", i+1)
		f.node(fmt.Sprintf("%s-%d", f.ns, i+1), ip)
		want = append(want, ip+":30700/1")
	}
	// Let every node event reach the controller's cache, which the next
	// write is computed from, while the first write waits.
	f.eventually(10*time.Second, func() error {
		var nodes corev1.NodeList
		f.must(mgr.GetClient().List(f.ctx, &nodes))
		if len(nodes.Items) < 21 {
			return fmt.Errorf("%d nodes in the controller's cache", len(nodes.Items))
		}
		return nil
	})
	f.emu.FinishWorkRequests()
	f.eventually(10*time.Second, func() error {
		if n := f.emu.Counters().Writes[classicLB]; n != 2 {
			return fmt.Errorf("%d writes", n)
		}
		return nil
	})
	f.emu.FinishWorkRequests()
	f.expectBackends(classicLB, "api", want...)
	f.waitReady(obj, v1beta1.ReasonRegistered)
	if n := f.emu.Counters().Writes[classicLB]; n != 2 {
		t.Fatalf("%d writes for 21 node events, want 2", n)
	}
	// Deletion needs its work request finished too.
	f.must(k8s.Delete(f.ctx, obj))
	f.eventually(20*time.Second, func() error {
		f.emu.FinishWorkRequests()
		if err := k8s.Get(f.ctx, client.ObjectKeyFromObject(obj), &v1beta1.LBRegistrar{}); err == nil {
			return fmt.Errorf("still present")
		}
		return nil
	})
}
