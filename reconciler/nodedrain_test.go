package reconciler_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/reconciler/desired"
	"github.com/peppy-ratio/lbregistrar/reconciler/metrics"
	"github.com/peppy-ratio/lbregistrar/test/ociemu"
)

// A node that leaves (the autoscaler's or Karpenter's taint, the Node
// deleted, the exclusion label, a graceful shutdown) has its backend drained for the node drain period, then
// removed, so its open connections finish; one that comes back before the
// period ends serves again. The drains are in the status record,
// /debug/lanes and the metrics.
func TestDepartingNodeIsDrainedThenRemoved(t *testing.T) {
	f := newFixture(t, ociemu.Options{WorkRequestLatency: 10 * time.Millisecond})
	for i, n := range []string{"a", "b", "c", "d", "e", "f"} {
		f.node(f.ns+"-"+n, fmt.Sprintf("10.0.45.%d", i+1))
	}
	const period = 6 * time.Second
	o := f.options()
	o.NodeDrainPeriod = period
	addr := freeAddr(t)
	f.startManager(o, func(o *ctrl.Options) { o.Metrics.BindAddress = addr })
	started := counter(t, metrics.NodeDrains.WithLabelValues("started"))
	ended := counter(t, metrics.NodeDrains.WithLabelValues("ended"))
	calledOff := counter(t, metrics.NodeDrains.WithLabelValues("called_off"))
	obj := f.registrar("drains", classicLB, []v1beta1.Target{fixedPort("api", 30845)})
	f.expectBackends(classicLB, "api", "10.0.45.1:30845/1", "10.0.45.2:30845/1", "10.0.45.3:30845/1", "10.0.45.4:30845/1", "10.0.45.5:30845/1", "10.0.45.6:30845/1")

	f.updateNode(f.ns+"-b", func(n *corev1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: desired.TaintToBeDeletedByClusterAutoscaler, Effect: corev1.TaintEffectNoSchedule})
	})
	f.must(k8s.Delete(f.ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: f.ns + "-c"}}))
	f.updateNode(f.ns+"-d", func(n *corev1.Node) { n.Labels[corev1.LabelNodeExcludeBalancers] = "true" })
	f.updateNode(f.ns+"-e", func(n *corev1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: desired.TaintKarpenterDisrupted, Effect: corev1.TaintEffectNoSchedule})
	})
	f.setNodeReady(f.ns+"-f", corev1.NodeCondition{Status: corev1.ConditionFalse, Reason: "KubeletNotReady", Message: "node is shutting down"})
	f.expectBackends(classicLB, "api", "10.0.45.1:30845/1", "10.0.45.2:30845/1,drain", "10.0.45.3:30845/1,drain", "10.0.45.4:30845/1,drain", "10.0.45.5:30845/1,drain", "10.0.45.6:30845/1,drain")

	var since time.Time
	f.eventually(10*time.Second, func() error {
		rec := f.get(obj).Status.BackendSets
		if len(rec) != 1 || len(rec[0].DrainingBackends()) != 5 || rec[0].OwnedCount() != 6 {
			return fmt.Errorf("record: %+v", rec)
		}
		for _, b := range rec[0].DrainingBackends() {
			if since.IsZero() || b.Since.Before(&metav1.Time{Time: since}) {
				since = b.Since.Time
			}
		}
		view, err := getLanes(addr)
		if err != nil {
			return err
		}
		var listed []string
		for _, d := range view.NodeDrains {
			if d.LBRegistrar == obj.Name && d.BackendSet == "api" && !d.Until.Before(since.Add(period)) {
				listed = append(listed, d.Backend)
			}
		}
		if want := []string{"10.0.45.2:30845", "10.0.45.3:30845", "10.0.45.4:30845", "10.0.45.5:30845", "10.0.45.6:30845"}; !slices.Equal(listed, want) {
			return fmt.Errorf("/debug/lanes drains %v, want %v", listed, want)
		}
		return nil
	})

	// d comes back before the period ends: it serves again, not re-added.
	f.updateNode(f.ns+"-d", func(n *corev1.Node) { n.Labels[corev1.LabelNodeExcludeBalancers] = "false" })
	f.expectBackends(classicLB, "api", "10.0.45.1:30845/1", "10.0.45.2:30845/1,drain", "10.0.45.3:30845/1,drain", "10.0.45.4:30845/1", "10.0.45.5:30845/1,drain", "10.0.45.6:30845/1,drain")

	f.expectBackends(classicLB, "api", "10.0.45.1:30845/1", "10.0.45.4:30845/1")
	if now := time.Now(); now.Before(since.Add(period)) {
		t.Errorf("drained backends removed at %s, before their drain period ended at %s", now, since.Add(period))
	}
	f.eventually(10*time.Second, func() error {
		rec := f.get(obj).Status.BackendSets
		if len(rec) != 1 || len(rec[0].Draining) != 0 || rec[0].OwnedCount() != 2 {
			return fmt.Errorf("record: %+v", rec)
		}
		return nil
	})
	for event, want := range map[string]float64{"started": started + 5, "ended": ended + 4, "called_off": calledOff + 1} {
		if got := counter(t, metrics.NodeDrains.WithLabelValues(event)); got != want {
			t.Errorf("lbregistrar_node_drains_total{event=%q} = %v, want %v", event, got, want)
		}
	}
}

// A node that stops hosting a serving endpoint of an
// externalTrafficPolicy: Local Service is drained as a departing node is:
// kept serving nothing new for the period, undrained if an endpoint comes
// back meanwhile, removed once the period ends.
func TestNodeThatStopsServingIsDrained(t *testing.T) {
	f := newFixture(t, ociemu.Options{WorkRequestLatency: 10 * time.Millisecond})
	f.node(f.ns+"-a", "10.0.46.1")
	f.node(f.ns+"-b", "10.0.46.2")
	svc := f.service("gw", corev1.ServicePort{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), NodePort: 30072})
	svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	f.must(k8s.Update(f.ctx, svc))
	f.endpoints("gw", f.ns+"-a", f.ns+"-b")
	const period = 4 * time.Second
	o := f.options()
	o.NodeDrainPeriod = period
	f.startManager(o)
	port := intstr.FromString("http")
	f.registrar("local", classicLB, []v1beta1.Target{{Name: "gw", Namespace: f.ns, Port: &port, BackendSetName: "api", Weight: 1}})
	f.expectBackends(classicLB, "api", "10.0.46.1:30072/1", "10.0.46.2:30072/1")

	f.endpoints("gw", f.ns+"-a")
	f.expectBackends(classicLB, "api", "10.0.46.1:30072/1", "10.0.46.2:30072/1,drain")
	f.endpoints("gw", f.ns+"-a", f.ns+"-b")
	f.expectBackends(classicLB, "api", "10.0.46.1:30072/1", "10.0.46.2:30072/1")

	f.endpoints("gw", f.ns+"-a")
	drained := time.Now()
	f.expectBackends(classicLB, "api", "10.0.46.1:30072/1", "10.0.46.2:30072/1,drain")
	f.expectBackends(classicLB, "api", "10.0.46.1:30072/1")
	// The record keeps the drain's start to the second.
	if took := time.Since(drained); took < period-time.Second {
		t.Errorf("the drained backend was removed %s after its endpoint left, before the %s period", took, period)
	}
}

// A departing node's drain period counts from when the drain took effect,
// the end of its work request, not from when it was planned: with work
// requests nearly as long as the period, the backend would otherwise be
// removed soon after it was drained.
func TestNodeDrainPeriodStartsWhenTheDrainTookEffect(t *testing.T) {
	const latency, period = 2 * time.Second, 3 * time.Second
	f := newFixture(t, ociemu.Options{WorkRequestLatency: latency})
	f.node(f.ns+"-a", "10.0.47.1")
	f.node(f.ns+"-b", "10.0.47.2")
	o := f.options()
	o.NodeDrainPeriod = period
	o.Resync = time.Hour
	f.startManager(o)
	obj := f.registrar("slow", classicLB, []v1beta1.Target{fixedPort("api", 30847)})
	f.expectBackends(classicLB, "api", "10.0.47.1:30847/1", "10.0.47.2:30847/1")
	f.updateNode(f.ns+"-b", func(n *corev1.Node) { n.Labels[corev1.LabelNodeExcludeBalancers] = "true" })
	var drained time.Time
	f.eventually(20*time.Second, func() error {
		switch got := f.backends(classicLB, "api"); {
		case slices.Equal(got, []string{"10.0.47.1:30847/1", "10.0.47.2:30847/1,drain"}) && drained.IsZero():
			drained = time.Now()
		case slices.Equal(got, []string{"10.0.47.1:30847/1"}):
			return nil
		}
		return fmt.Errorf("not removed yet")
	})
	// Drained for the period, then for the removal's work request.
	if drainedFor := time.Since(drained); drained.IsZero() || drainedFor < period+latency/2 {
		t.Errorf("the backend was drained for %s, want the drain period %s and the removal's work request", drainedFor, period)
	}
	f.eventually(10*time.Second, func() error {
		if rec := f.get(obj).Status.BackendSets; len(rec) != 1 || len(rec[0].Draining) != 0 || rec[0].OwnedCount() != 1 {
			return fmt.Errorf("record: %+v", rec)
		}
		return nil
	})
}
