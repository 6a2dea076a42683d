package reconciler_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/reconciler/desired"
	"github.com/peppy-ratio/lbregistrar/reconciler/metrics"
	"github.com/peppy-ratio/lbregistrar/test/ociemu"
)

// A node that leaves (the autoscaler's taint, the Node deleted, the
// exclusion label) has its backend drained for the node drain period, then
// removed, so its open connections finish; one that comes back before the
// period ends serves again. The drains are in the status record,
// /debug/lanes and the metrics.
func TestDepartingNodeIsDrainedThenRemoved(t *testing.T) {
	f := newFixture(t, ociemu.Options{WorkRequestLatency: 10 * time.Millisecond})
	for i, n := range []string{"a", "b", "c", "d"} {
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
	f.expectBackends(classicLB, "api", "10.0.45.1:30845/1", "10.0.45.2:30845/1", "10.0.45.3:30845/1", "10.0.45.4:30845/1")

	f.updateNode(f.ns+"-b", func(n *corev1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: desired.TaintToBeDeletedByClusterAutoscaler, Effect: corev1.TaintEffectNoSchedule})
	})
	f.must(k8s.Delete(f.ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: f.ns + "-c"}}))
	f.updateNode(f.ns+"-d", func(n *corev1.Node) { n.Labels[corev1.LabelNodeExcludeBalancers] = "true" })
	f.expectBackends(classicLB, "api", "10.0.45.1:30845/1", "10.0.45.2:30845/1,drain", "10.0.45.3:30845/1,drain", "10.0.45.4:30845/1,drain")

	var since time.Time
	f.eventually(10*time.Second, func() error {
		rec := f.get(obj).Status.BackendSets
		if len(rec) != 1 || len(rec[0].DrainingBackends()) != 3 || rec[0].OwnedCount() != 4 {
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
		if want := []string{"10.0.45.2:30845", "10.0.45.3:30845", "10.0.45.4:30845"}; !slices.Equal(listed, want) {
			return fmt.Errorf("/debug/lanes drains %v, want %v", listed, want)
		}
		return nil
	})

	// d comes back before the period ends: it serves again, not re-added.
	f.updateNode(f.ns+"-d", func(n *corev1.Node) { n.Labels[corev1.LabelNodeExcludeBalancers] = "false" })
	f.expectBackends(classicLB, "api", "10.0.45.1:30845/1", "10.0.45.2:30845/1,drain", "10.0.45.3:30845/1,drain", "10.0.45.4:30845/1")

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
	for event, want := range map[string]float64{"started": started + 3, "ended": ended + 2, "called_off": calledOff + 1} {
		if got := counter(t, metrics.NodeDrains.WithLabelValues(event)); got != want {
			t.Errorf("lbregistrar_node_drains_total{event=%q} = %v, want %v", event, got, want)
		}
	}
}
