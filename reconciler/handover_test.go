package reconciler_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/api/validation"
	"github.com/peppy-ratio/lbregistrar/test/ociemu"
)

// A resource that takes over backends while the resource it replaces is
// draining them (lbregistrar migrate's replaces, or a GitOps sync that
// applies the new resource and prunes the old one together) registers them
// serving, on both load balancer types: Ready=True means not drained.
func TestHandOverDuringDrainServes(t *testing.T) {
	for _, tc := range []struct {
		name, lb, set string
		replaces      bool
	}{
		{"replaces on a network load balancer", networkLB, "tcp", true},
		{"same backend set on a classic load balancer", classicLB, "api", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, ociemu.Options{WorkRequestLatency: 10 * time.Millisecond})
			f.node(f.ns+"-a", "10.0.40.1")
			o := f.options()
			o.DrainPeriod = 3 * time.Second
			f.startManager(o)
			before := f.backends(tc.lb, tc.set)
			with := func(b string) []string {
				return slices.Sorted(slices.Values(append(before[:len(before):len(before)], b)))
			}

			old := f.registrar("old", tc.lb, []v1beta1.Target{fixedPort(tc.set, 30040)})
			f.expectBackends(tc.lb, tc.set, with("10.0.40.1:30040/1")...)
			f.must(k8s.Delete(f.ctx, old))
			f.expectBackends(tc.lb, tc.set, with("10.0.40.1:30040/1,drain")...)

			replacement := f.registrar("new", tc.lb, []v1beta1.Target{fixedPort(tc.set, 30040)}, func(o *v1beta1.LBRegistrar) {
				if tc.replaces {
					o.Annotations = map[string]string{validation.ReplacesAnnotation: old.Name}
				}
			})
			f.expectBackends(tc.lb, tc.set, with("10.0.40.1:30040/1")...)
			f.eventually(10*time.Second, func() error {
				if err := k8s.Get(f.ctx, client.ObjectKeyFromObject(old), &v1beta1.LBRegistrar{}); err == nil {
					return fmt.Errorf("%s still present", old.Name)
				}
				return nil
			})
			// Past the old one's drain period and gone: the backend still serves,
			// and the replacement says so.
			if got := f.backends(tc.lb, tc.set); fmt.Sprint(got) != fmt.Sprint(with("10.0.40.1:30040/1")) {
				t.Fatalf("after the old resource went: %v", got)
			}
			if c := meta.FindStatusCondition(f.get(replacement).Status.Conditions, v1beta1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
				t.Fatalf("replacement ready: %+v", c)
			}
		})
	}
}

// The replaces annotation alone does not take a backend set from its
// holder: written past admission (here with no webhook in front, as before
// lbregistrar was installed), it names the holder from a resource that
// signs in with another key. The newcomer is in Conflict and writes nothing
// there; the holder keeps maintaining its backends (a node that joins is
// added). Once the holder is gone, nothing is contested and the newcomer
// takes the backend set.
func TestHandOverFromAnotherIdentityTakesNothing(t *testing.T) {
	f := newFixture(t, ociemu.Options{})
	f.node(f.ns+"-a", "10.0.38.1")
	f.startManager(f.options())
	holder := f.registrar("holder", classicLB, []v1beta1.Target{fixedPort("api", 30038)})
	f.expectBackends(classicLB, "api", "10.0.38.1:30038/1")

	other, _ := f.newKey("other-key")
	newcomer := f.registrar("newcomer", classicLB, []v1beta1.Target{fixedPort("api", 30039)}, func(o *v1beta1.LBRegistrar) {
		o.Spec.APIKey = other.DeepCopy()
		o.Annotations = map[string]string{validation.ReplacesAnnotation: holder.Name}
	})
	f.expectConflict(newcomer, holder.Name)
	f.node(f.ns+"-b", "10.0.38.2")
	f.expectBackends(classicLB, "api", "10.0.38.1:30038/1", "10.0.38.2:30038/1")
	if c := meta.FindStatusCondition(f.get(holder).Status.Conditions, v1beta1.ConditionConflict); c != nil && c.Status != metav1.ConditionFalse {
		t.Errorf("holder's Conflict: %+v", c)
	}

	f.must(k8s.Delete(f.ctx, holder))
	f.expectBackends(classicLB, "api", "10.0.38.1:30039/1", "10.0.38.2:30039/1")
}

// A record the controller did not sign is never a reason to remove or
// change a backend: another identity writes status (here with no webhook
// in front, as a restore or a writer past admission would) to claim a
// foreign backend in the resource's backend set and in a load balancer its
// spec never names; the controller ignores the record (a Warning event
// says so), keeps what it wants registered, and deleting the resource
// removes only its own backend.
func TestUnsignedRecordIsNotActedOn(t *testing.T) {
	f := newFixture(t, ociemu.Options{})
	f.node(f.ns+"-a", "10.0.41.1")
	f.startManager(f.options())
	webBefore := f.backends(classicLB, "web") // 192.168.9.9:8080, someone else's
	nlbBefore := f.backends(networkLB, "tcp")
	obj := f.registrar("r", classicLB, []v1beta1.Target{fixedPort("web", 30041)})
	f.expectBackends(classicLB, "web", append(webBefore, "10.0.41.1:30041/1")...)
	f.eventually(10*time.Second, func() error {
		if o := f.get(obj); o.Status.RecordSignature == "" {
			return fmt.Errorf("record not signed yet: %+v", o.Status)
		}
		return nil
	})

	f.writeStatus(obj, func(forged *v1beta1.LBRegistrar) {
		forged.Status.BackendSets = append(forged.Status.BackendSets, v1beta1.BackendSetStatus{Name: "web-2"})
		forged.Status.BackendSets[0].Backends = append(forged.Status.BackendSets[0].Backends, v1beta1.BackendGroup{Port: 8080, Weight: 3, Addresses: "192.168.9.9"})
	})
	f.updateRegistrar(obj, func(o *v1beta1.LBRegistrar) { o.Annotations = map[string]string{"touch": "1"} })
	f.eventually(10*time.Second, func() error {
		o := f.get(obj)
		if len(o.Status.BackendSets) != 1 || o.Status.BackendSets[0].OwnedCount() != 1 {
			return fmt.Errorf("record still forged: %+v", o.Status.BackendSets)
		}
		return nil
	})
	f.expectBackends(classicLB, "web", append(webBefore, "10.0.41.1:30041/1")...)
	f.expectEvent(obj, v1beta1.ReasonRecordUnverified)

	// A record pointing at another load balancer, whose backends the
	// controller would otherwise leave as it does an old one.
	f.writeStatus(obj, func(forged *v1beta1.LBRegistrar) {
		forged.Status.LoadBalancerID = networkLB
		forged.Status.BackendSets = []v1beta1.BackendSetStatus{{Name: "tcp", Backends: []v1beta1.BackendGroup{{Port: 30080, Weight: 2, Addresses: foreignIP}}}}
	})
	f.updateRegistrar(obj, func(o *v1beta1.LBRegistrar) { o.Annotations = map[string]string{"touch": "2"} })
	f.eventually(10*time.Second, func() error {
		if o := f.get(obj); o.Status.LoadBalancerID != classicLB || o.Status.RecordSignature == "" || len(o.Status.BackendSets) != 1 {
			return fmt.Errorf("record: %+v", o.Status)
		}
		return nil
	})
	f.expectBackends(classicLB, "web", append(webBefore, "10.0.41.1:30041/1")...)
	f.expectBackends(networkLB, "tcp", nlbBefore...)

	f.writeStatus(obj, func(forged *v1beta1.LBRegistrar) {
		forged.Status.BackendSets[0].Backends = append(forged.Status.BackendSets[0].Backends, v1beta1.BackendGroup{Port: 8080, Weight: 3, Addresses: "192.168.9.9"})
	})
	f.must(k8s.Delete(f.ctx, obj))
	f.eventually(10*time.Second, func() error {
		if err := k8s.Get(f.ctx, client.ObjectKeyFromObject(obj), &v1beta1.LBRegistrar{}); err == nil {
			return fmt.Errorf("%s still present", obj.Name)
		}
		return nil
	})
	// Its own backend was ignored with the rest of the forged record: left
	// behind, never a foreign one removed.
	f.expectBackends(classicLB, "web", append(webBefore, "10.0.41.1:30041/1")...)
	f.expectBackends(networkLB, "tcp", nlbBefore...)
}

// expectEvent waits for an event of reason about obj.
func (f *fixture) expectEvent(obj *v1beta1.LBRegistrar, reason string) {
	f.t.Helper()
	f.eventually(10*time.Second, func() error {
		var evs eventsv1.EventList
		f.must(k8s.List(f.ctx, &evs, client.InNamespace(metav1.NamespaceDefault)))
		for _, e := range evs.Items {
			if e.Regarding.Name == obj.Name && e.Reason == reason {
				return nil
			}
		}
		return fmt.Errorf("no %s event for %s", reason, obj.Name)
	})
}

// writeStatus changes a resource's status as another writer would,
// retrying on conflicts with the controller's own writes.
func (f *fixture) writeStatus(o *v1beta1.LBRegistrar, change func(*v1beta1.LBRegistrar)) {
	f.t.Helper()
	f.must(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := f.get(o)
		change(cur)
		return f.api.Status().Update(f.ctx, cur)
	}))
}

// A record restored from a backup (the object created anew, its status
// written back by the restore tool) carries the controller's signature of
// another object: it is not acted on. Between the backup and the restore
// a node went away while no controller ran; the restored record still
// lists its backend, which stays (left behind, never removed on a record
// the controller cannot vouch for).
func TestRestoredRecordIsNotActedOn(t *testing.T) {
	f := newFixture(t, ociemu.Options{})
	f.node(f.ns+"-a", "10.0.43.1")
	f.node(f.ns+"-b", "10.0.43.2")
	_, stop := f.startManager(f.options())
	obj := f.registrar("r", classicLB, []v1beta1.Target{fixedPort("admin", 30043)})
	f.expectBackends(classicLB, "admin", "10.0.43.1:30043/1", "10.0.43.2:30043/1")
	var backup *v1beta1.LBRegistrar
	f.eventually(10*time.Second, func() error {
		backup = f.get(obj)
		if backup.Status.RecordSignature == "" || len(backup.Status.BackendSets) == 0 || backup.Status.BackendSets[0].OwnedCount() != 2 {
			return fmt.Errorf("record: %+v", backup.Status)
		}
		return nil
	})
	stop()
	// The cluster is lost; the load balancer lives on, and changes.
	cur := f.get(obj)
	cur.Finalizers = nil
	f.must(k8s.Update(f.ctx, cur))
	f.must(k8s.Delete(f.ctx, cur))
	f.must(k8s.Delete(f.ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: f.ns + "-a"}}))

	restored := backup.DeepCopy()
	restored.ResourceVersion, restored.UID, restored.Finalizers = "", "", nil
	f.must(k8s.Create(f.ctx, restored))
	restored.Status = backup.Status
	f.must(k8s.Status().Update(f.ctx, restored))
	f.startManager(f.options())
	f.expectEvent(restored, v1beta1.ReasonRecordUnverified)
	f.eventually(10*time.Second, func() error {
		o := f.get(restored)
		if o.Status.RecordSignature == "" || o.Status.RecordSignature == backup.Status.RecordSignature || len(o.Status.BackendSets) == 0 || o.Status.BackendSets[0].OwnedCount() != 1 {
			return fmt.Errorf("record not signed anew for what is wanted: %+v", o.Status)
		}
		return nil
	})
	// 10.0.43.1:30043, the gone node's, stays: the restored record listed
	// it, but the controller cannot vouch for that record.
	f.expectBackends(classicLB, "admin", "10.0.43.1:30043/1", "10.0.43.2:30043/1")
}

// The drain period of a deleted resource counts from when the drain took
// effect, the end of its work request, not from the deletion: with work
// requests as long as the period, the backend would otherwise be removed
// the moment it was drained. The removal still follows at the period's
// end, not at the next resync.
func TestDrainPeriodStartsWhenTheDrainTookEffect(t *testing.T) {
	const latency, period = 2 * time.Second, 3 * time.Second
	f := newFixture(t, ociemu.Options{WorkRequestLatency: latency})
	f.node(f.ns+"-a", "10.0.45.1")
	o := f.options()
	o.DrainPeriod = period
	o.Resync = time.Hour
	f.startManager(o)
	obj := f.registrar("slow", classicLB, []v1beta1.Target{fixedPort("admin", 30045)})
	f.expectBackends(classicLB, "admin", "10.0.45.1:30045/1")
	f.must(k8s.Delete(f.ctx, obj))
	var drained time.Time
	f.eventually(15*time.Second, func() error {
		switch got := f.backends(classicLB, "admin"); {
		case slices.Equal(got, []string{"10.0.45.1:30045/1,drain"}) && drained.IsZero():
			drained = time.Now()
		case len(got) == 0:
			return nil
		}
		return fmt.Errorf("not removed yet")
	})
	// Drained for the period, then for the removal's work request.
	if drainedFor := time.Since(drained); drained.IsZero() || drainedFor < period+latency/2 {
		t.Errorf("the backend was drained for %s, want the drain period %s and the removal's work request", drainedFor, period)
	}
	f.eventually(10*time.Second, func() error {
		if err := k8s.Get(f.ctx, client.ObjectKeyFromObject(obj), &v1beta1.LBRegistrar{}); err == nil {
			return fmt.Errorf("%s still present", obj.Name)
		}
		return nil
	})
}
