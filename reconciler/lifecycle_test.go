package reconciler_test

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/test/ociemu"
)

// waitGone waits until obj is deleted.
func (f *fixture) waitGone(obj *v1beta1.LBRegistrar) {
	f.t.Helper()
	f.eventually(20*time.Second, func() error {
		if err := f.api.Get(f.ctx, client.ObjectKeyFromObject(obj), &v1beta1.LBRegistrar{}); err == nil {
			return fmt.Errorf("%s still present", obj.Name)
		}
		return nil
	})
}

// A suspended resource writes nothing to OCI, whatever changes in the
// cluster, and says so; lifting it with nothing changed writes nothing
// either, and a change made while it was suspended is written once lifted.
// Deleted while suspended, it leaves its backends registered.
func TestSuspendedResourceWritesNothing(t *testing.T) {
	f := newFixture(t, ociemu.Options{})
	f.node(f.ns+"-a", "10.0.40.1")
	o := f.options()
	o.DrainPeriod = 0
	f.startManager(o)
	obj := f.registrar("paused", classicLB, []v1beta1.Target{fixedPort("api", 30440)})
	f.expectBackends(classicLB, "api", "10.0.40.1:30440/1")
	f.waitReady(obj, v1beta1.ReasonRegistered)

	suspend := func(on bool) func(*v1beta1.LBRegistrar) {
		return func(o *v1beta1.LBRegistrar) { o.Spec.Suspend = on }
	}
	f.emu.ResetCalls()
	f.updateRegistrar(obj, suspend(true))
	f.waitSuspended(obj, metav1.ConditionTrue)
	f.updateRegistrar(obj, suspend(false))
	f.waitReady(obj, v1beta1.ReasonRegistered)
	if n := f.writesTo(classicLB, "api"); n != 0 {
		t.Errorf("suspending and lifting with nothing changed wrote %d times", n)
	}

	f.updateRegistrar(obj, suspend(true))
	f.waitSuspended(obj, metav1.ConditionTrue)
	f.node(f.ns+"-b", "10.0.40.2")
	time.Sleep(2 * time.Second) // what a reconcile would have written by now
	if got := f.backends(classicLB, "api"); len(got) != 1 || f.writesTo(classicLB, "api") != 0 {
		t.Errorf("suspended, a node added: backends %v after %d writes, want the one node and none", got, f.writesTo(classicLB, "api"))
	}
	if rec := f.get(obj).Status.BackendSets; len(rec) != 1 || rec[0].OwnedCount() != 1 {
		t.Errorf("the ownership record changed while suspended: %+v", rec)
	}
	f.updateRegistrar(obj, suspend(false))
	f.expectBackends(classicLB, "api", "10.0.40.1:30440/1", "10.0.40.2:30440/1")
	if n := f.writesTo(classicLB, "api"); n != 1 {
		t.Errorf("lifted after a node was added: %d writes, want 1", n)
	}

	f.updateRegistrar(obj, suspend(true))
	f.waitSuspended(obj, metav1.ConditionTrue)
	f.emu.ResetCalls()
	f.must(f.api.Delete(f.ctx, obj))
	f.waitGone(obj)
	f.expectBackends(classicLB, "api", "10.0.40.1:30440/1", "10.0.40.2:30440/1")
	if n := f.writesTo(classicLB, "api"); n != 0 {
		t.Errorf("deleted while suspended: %d writes, want none", n)
	}
}

// With deletionPolicy Orphan, deleting a resource releases it at once and
// leaves every backend it registered (TestDeletionDrainsThenRemovesOnlyOwned
// shows the default).
func TestOrphanPolicyKeepsBackends(t *testing.T) {
	f := newFixture(t, ociemu.Options{})
	f.node(f.ns+"-a", "10.0.41.1")
	o := f.options()
	o.DrainPeriod = time.Hour // an orphan does not wait for it
	f.startManager(o)
	kept := f.registrar("kept", classicLB, []v1beta1.Target{fixedPort("api", 30441)}, func(o *v1beta1.LBRegistrar) {
		o.Spec.DeletionPolicy = v1beta1.DeletionPolicyOrphan
	})
	f.expectBackends(classicLB, "api", "10.0.41.1:30441/1")
	f.waitReady(kept, v1beta1.ReasonRegistered)
	f.emu.ResetCalls()
	f.must(f.api.Delete(f.ctx, kept))
	f.waitGone(kept)
	f.expectBackends(classicLB, "api", "10.0.41.1:30441/1")
	if n := f.writesTo(classicLB, "api"); n != 0 {
		t.Errorf("an orphaning deletion wrote %d times", n)
	}
}

// A target removed from spec.services drains its backends for the node
// drain period, as a departing node's, before removing them; the targets
// left in place are not written, and the record of the removed one goes
// with its last backend.
func TestRemovedTargetDrainsFirst(t *testing.T) {
	f := newFixture(t, ociemu.Options{})
	f.node(f.ns+"-a", "10.0.43.1")
	o := f.options()
	o.NodeDrainPeriod = 2 * time.Second
	f.startManager(o)
	obj := f.registrar("two", classicLB, []v1beta1.Target{fixedPort("api", 30460), fixedPort("admin", 30461)})
	f.expectBackends(classicLB, "api", "10.0.43.1:30460/1")
	f.expectBackends(classicLB, "admin", "10.0.43.1:30461/1")
	f.emu.ResetCalls()

	f.updateRegistrar(obj, func(o *v1beta1.LBRegistrar) { o.Spec.Services = o.Spec.Services[:1] })
	f.expectBackends(classicLB, "admin", "10.0.43.1:30461/1,drain")
	f.expectBackends(classicLB, "admin")
	f.eventually(10*time.Second, func() error {
		if rec := f.get(obj).Status.BackendSets; len(rec) != 1 || rec[0].Name != "api" {
			return fmt.Errorf("record %+v, want api's alone", rec)
		}
		return nil
	})
	if n := f.writesTo(classicLB, "api"); n != 0 {
		t.Errorf("the backend set of the target left in place was written %d times", n)
	}
}

// Moving to another load balancer drains the backends in the old one for
// the drain period before removing them, and only then registers in the
// new one; the status says so meanwhile.
func TestMoveDrainsTheOldLoadBalancer(t *testing.T) {
	f := newFixture(t, ociemu.Options{})
	f.node(f.ns+"-a", "10.0.44.1")
	o := f.options()
	o.DrainPeriod = 2 * time.Second
	f.startManager(o)
	obj := f.registrar("mover", classicLB, []v1beta1.Target{fixedPort("admin", 30470)})
	f.expectBackends(classicLB, "admin", "10.0.44.1:30470/1")
	nlbBefore := f.backends(networkLB, "tcp")

	f.updateRegistrar(obj, func(o *v1beta1.LBRegistrar) {
		o.Spec.LoadBalancerID = networkLB
		o.Spec.Services = []v1beta1.Target{fixedPort("tcp", 30470)}
	})
	// waitReady holds Ready's observedGeneration to the spec's; the
	// status's too, so a GitOps tool sees the move is this spec's work.
	f.waitReady(obj, v1beta1.ReasonMoving, func(o *v1beta1.LBRegistrar, _ *metav1.Condition) error {
		if o.Status.ObservedGeneration != o.Generation {
			return fmt.Errorf("moving, status.observedGeneration %d, want %d", o.Status.ObservedGeneration, o.Generation)
		}
		return nil
	})
	f.expectBackends(classicLB, "admin", "10.0.44.1:30470/1,drain")
	if got := f.backends(networkLB, "tcp"); len(got) != len(nlbBefore) {
		t.Errorf("the new load balancer was registered during the old one's drain: %v", got)
	}
	f.expectBackends(classicLB, "admin")
	f.expectBackends(networkLB, "tcp", append(nlbBefore, "10.0.44.1:30470/1")...)
	f.waitReady(obj, v1beta1.ReasonRegistered)
	if st := f.get(obj).Status; st.LoadBalancerID != networkLB || len(st.BackendSets) != 1 || st.BackendSets[0].Name != "tcp" {
		t.Errorf("status: %+v", st)
	}
}
