package reconciler_test

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/test/ociemu"
)

// A classic load balancer has one ETag for everything it holds. A resource
// changing three of its backend sets writes each once and is never refused
// with 412 for its own writes; another tool changing the load balancer
// between a read and its write costs a read and a write again, not the
// reconcile, even beyond what Attempts would allow.
func TestClassicLoadBalancerETagIsPerLoadBalancer(t *testing.T) {
	f := newFixture(t, ociemu.Options{WorkRequestLatency: 10 * time.Millisecond})
	f.node(f.ns+"-a", "10.0.30.1")
	o := f.options()
	o.Backoff.Attempts = 1
	// The first three reads of "admin" (the one before planning, then two
	// before writes) are each followed by someone else's change.
	f.emu.AddFault(ociemu.Fault{Operation: "GetBackendSet", LoadBalancerID: classicLB, BackendSet: "admin", ForeignChange: true, Times: 3})
	f.startManager(o)
	obj := f.registrar("etag", classicLB, []v1beta1.Target{fixedPort("admin", 31001), fixedPort("api", 31002), fixedPort("web", 31003)})

	f.eventually(20*time.Second, func() error {
		cur := f.get(obj)
		if c := condition(cur, v1beta1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue || len(cur.Status.BackendSets) != 3 {
			return fmt.Errorf("status: %+v", cur.Status)
		}
		return nil
	})
	f.expectBackends(classicLB, "admin", "10.0.30.1:31001/1")
	f.expectBackends(classicLB, "api", "10.0.30.1:31002/1")
	f.expectBackends(classicLB, "web", "192.168.9.9:8080/3,backup", "10.0.30.1:31003/1")
	c := f.emu.Counters()
	if c.Writes[classicLB] != 3 || c.PreconditionFailed != 2 {
		t.Errorf("%d writes and %d 412s; want 3 writes, and 412s only for the 2 writes another tool raced", c.Writes[classicLB], c.PreconditionFailed)
	}
	for _, set := range []string{"admin", "api", "web"} {
		if n := f.writesTo(classicLB, set); n != 1 {
			t.Errorf("backend set %s written %d times", set, n)
		}
	}
}
