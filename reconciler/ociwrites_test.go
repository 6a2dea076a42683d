package reconciler_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/oracle/oci-go-sdk/v65/common"
	"github.com/oracle/oci-go-sdk/v65/networkloadbalancer"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/reconciler/metrics"
	"github.com/peppy-ratio/lbregistrar/test/ociemu"
)

// An NLB's ETags are per backend set: one reconcile that writes its three
// sets reads each once, to plan, and writes them one after the other on
// those reads, with no 412 (a classic load balancer reads each again
// before its write: TestClassicLoadBalancerETagIsPerLoadBalancer).
func TestNetworkLoadBalancerETagIsPerBackendSet(t *testing.T) {
	f := newFixture(t, ociemu.Options{WorkRequestLatency: 10 * time.Millisecond})
	nlb := f.seedBalancers("etag", 1, 3, networkOnly, nil)[0]
	f.node(f.ns+"-a", "10.0.31.1")
	f.startManager(f.options())
	obj := f.registrar("etag", nlb, benchTargets(3))
	f.waitReady(obj, v1beta1.ReasonRegistered)
	reads, writes := map[string]int{}, 0
	for _, call := range f.emu.Calls() {
		if call.LoadBalancerID != nlb || writes == 3 {
			continue
		}
		switch call.Operation {
		case "GetBackendSet":
			reads[call.Path[strings.LastIndex(call.Path, "/")+1:]]++
		case "UpdateBackendSet":
			writes++
		}
	}
	if want := map[string]int{benchSet(0): 1, benchSet(1): 1, benchSet(2): 1}; writes != 3 || !maps.Equal(reads, want) {
		t.Errorf("backend sets read %v times before %d writes, want %v before 3", reads, writes, want)
	}
	if n := f.emu.Counters().PreconditionFailed; n != 0 {
		t.Errorf("%d writes refused with 412", n)
	}
}

// A classic load balancer has one ETag for everything it contains. A
// resource changing three of its backend sets writes each once and is
// never refused with 412 for its own writes: the first write goes out on
// the read that planned it, each later one on a read after the write
// before it. Another tool changing the load balancer between a read and
// its write costs a read and a write again, not the reconcile, even beyond
// what Attempts would allow.
func TestClassicLoadBalancerETagIsPerLoadBalancer(t *testing.T) {
	f := newFixture(t, ociemu.Options{WorkRequestLatency: 10 * time.Millisecond})
	f.node(f.ns+"-a", "10.0.30.1")
	o := f.options()
	o.Backoff.Attempts = 1
	// The first three reads of "admin" (the one that plans its write, then
	// the two after 412s) are each followed by someone else's change.
	f.emu.AddFault(ociemu.Fault{Operation: "GetBackendSet", LoadBalancerID: classicLB, BackendSet: "admin", ForeignChange: true, Times: 3})
	f.startManager(o)
	obj := f.registrar("etag", classicLB, []v1beta1.Target{fixedPort("admin", 31001), fixedPort("api", 31002), fixedPort("web", 31003)})

	f.waitReady(obj, v1beta1.ReasonRegistered, func(o *v1beta1.LBRegistrar, _ *metav1.Condition) error {
		if len(o.Status.BackendSets) != 3 {
			return fmt.Errorf("ownership record: %+v", o.Status.BackendSets)
		}
		return nil
	})
	f.expectBackends(classicLB, "admin", "10.0.30.1:31001/1")
	f.expectBackends(classicLB, "api", "10.0.30.1:31002/1")
	f.expectBackends(classicLB, "web", "192.168.9.9:8080/3,backup", "10.0.30.1:31003/1")
	c := f.emu.Counters()
	if c.Writes[classicLB] != 3 || c.PreconditionFailed != 3 {
		t.Errorf("%d writes and %d 412s; want 3 writes, and 412s only for the 3 writes another tool raced", c.Writes[classicLB], c.PreconditionFailed)
	}
	reads := map[string]int{}
	for _, call := range f.emu.Calls() {
		if call.Operation == "GetBackendSet" && call.LoadBalancerID == classicLB {
			reads[call.Path[strings.LastIndex(call.Path, "/")+1:]]++
		}
	}
	// Two reconciles (the first gives admin up at its second 412, as
	// Attempts = 1 allows one): each reads every set to plan, admin once
	// more after each 412 that is retried, api and web once more after the
	// write before theirs in the first.
	if want := map[string]int{"admin": 4, "api": 3, "web": 3}; !maps.Equal(reads, want) {
		t.Errorf("backend sets read %v times, want %v", reads, want)
	}
	for _, set := range []string{"admin", "api", "web"} {
		if n := f.writesTo(classicLB, set); n != 1 {
			t.Errorf("backend set %s written %d times", set, n)
		}
	}
}

// A write OCI accepts but whose answer is lost is retried under the same
// retry token, so it is matched to the work request it made: one write, no
// 409 from writing again into the busy load balancer, and the work request
// recorded.
func TestLostAnswerIsOneWrite(t *testing.T) {
	f := newFixture(t, ociemu.Options{WorkRequestLatency: 10 * time.Millisecond})
	f.node(f.ns+"-a", "10.0.31.1")
	stuck := f.emu.AddFault(ociemu.Fault{Operation: "UpdateBackendSet", LoadBalancerID: networkLB, StuckUpdating: true, Times: 1})
	f.emu.AddFault(ociemu.Fault{Operation: "UpdateBackendSet", LoadBalancerID: networkLB, LoseResponse: true, Status: 503, Times: 1})
	f.startManager(f.options())
	obj := f.registrar("lost", networkLB, []v1beta1.Target{fixedPort("tcp", 31010)})

	var lost string
	f.eventually(20*time.Second, func() error {
		var writes []ociemu.Call
		for _, c := range f.emu.Calls() {
			if c.Operation == "UpdateBackendSet" {
				writes = append(writes, c)
			}
		}
		if len(writes) < 2 {
			return fmt.Errorf("%d writes sent, want the lost one and its retry", len(writes))
		}
		lost = writes[0].WorkRequestID
		return nil
	})
	f.emu.RemoveFault(stuck)
	f.expectBackends(networkLB, "tcp", "192.168.9.9:30080/2,offline", "ocid1.instance.oc1.iad.someoneelse:30080/1", "10.0.31.1:31010/1")
	f.eventually(20*time.Second, func() error {
		rec := f.get(obj).Status.BackendSets
		if len(rec) != 1 || rec[0].LastWorkRequest == nil || rec[0].LastWorkRequest.ID != lost || rec[0].LastWorkRequest.Status != "SUCCEEDED" {
			return fmt.Errorf("record %+v, want the lost write's work request %s, SUCCEEDED", rec, lost)
		}
		return nil
	})
	if c := f.emu.Counters(); c.WorkRequests != 1 || c.Conflicts != 0 {
		t.Errorf("%d work requests, %d conflicts; want 1 and 0", c.WorkRequests, c.Conflicts)
	}
}

// The opc-request-id of a refused write, which Oracle support asks for, is
// in the Ready condition and the WriteFailed event.
func TestRefusedWriteNamesItsRequestID(t *testing.T) {
	f := newFixture(t, ociemu.Options{WorkRequestLatency: 10 * time.Millisecond})
	f.node(f.ns+"-a", "10.0.32.1")
	f.emu.AddFault(ociemu.Fault{Operation: "UpdateBackendSet", LoadBalancerID: classicLB, Status: 400, Code: "InvalidParameter"})
	f.startManager(f.options())
	obj := f.registrar("request-id", classicLB, []v1beta1.Target{fixedPort("api", 31020)})

	var refused []string
	f.eventually(20*time.Second, func() error {
		refused = nil
		for _, c := range f.emu.Calls() {
			if c.Operation == "UpdateBackendSet" && c.Status == 400 {
				refused = append(refused, c.RequestID)
			}
		}
		if len(refused) == 0 {
			return fmt.Errorf("no write refused yet")
		}
		return nil
	})
	named := func(text string) bool {
		return slices.ContainsFunc(refused, func(id string) bool { return strings.Contains(text, "opc-request-id "+id) })
	}
	f.waitReady(obj, v1beta1.ReasonWriteRefused, func(_ *v1beta1.LBRegistrar, ready *metav1.Condition) error {
		if !named(ready.Message) {
			return fmt.Errorf("ready %+v does not name any of %q", ready, refused)
		}
		var evs eventsv1.EventList
		f.must(k8s.List(f.ctx, &evs, client.InNamespace(metav1.NamespaceDefault)))
		for _, e := range evs.Items {
			if e.Regarding.Name == obj.Name && e.Reason == v1beta1.ReasonWriteRefused && named(e.Note) {
				return nil
			}
		}
		return fmt.Errorf("no WriteRefused event names any of %q", refused)
	})
}

// A fresh API key is refused (401) until OCI has it ACTIVE; the reconcile
// fails and the workqueue's backoff tries again, so the resource converges
// once the key is taken, with no change to it or its Secret.
func TestFreshKeyIsRetriedUntilOCITakesIt(t *testing.T) {
	f := newFixture(t, ociemu.Options{WorkRequestLatency: 10 * time.Millisecond})
	f.node(f.ns+"-a", "10.0.33.1")
	key, _, register := f.unregisteredKey("fresh-key")
	f.startManager(f.options())
	obj := f.registrar("fresh-key", classicLB, []v1beta1.Target{fixedPort("api", 31030)}, func(o *v1beta1.LBRegistrar) { o.Spec.APIKey = key.DeepCopy() })
	f.eventually(20*time.Second, func() error {
		if c := meta.FindStatusCondition(f.get(obj).Status.Conditions, v1beta1.ConditionReady); c == nil || !strings.Contains(c.Message, "401 NotAuthenticated") {
			return fmt.Errorf("ready: %+v", c)
		}
		return stalled(f.get(obj), v1beta1.ReasonNotAuthorized)
	})
	register()
	f.expectBackends(classicLB, "api", "10.0.33.1:31030/1")
}

// OCI answers 404 alike for a backend set that does not exist and for one
// the key may not read yet (a policy still propagating). Either is retried
// with the workqueue's backoff, not only at the next resync, so a backend
// set created moments later is registered soon after.
func TestMissingBackendSetIsRetriedWithBackoff(t *testing.T) {
	f := newFixture(t, ociemu.Options{WorkRequestLatency: 10 * time.Millisecond})
	f.node(f.ns+"-a", "10.0.34.1")
	o := f.options()
	o.Resync = time.Hour
	f.startManager(o)
	obj := f.registrar("later", classicLB, []v1beta1.Target{fixedPort("later", 31040)})
	f.eventually(20*time.Second, func() error {
		if c := meta.FindStatusCondition(f.get(obj).Status.Conditions, v1beta1.ConditionReady); c == nil || !strings.Contains(c.Message, `backend set "later" not found`) {
			return fmt.Errorf("ready: %+v", c)
		}
		return stalled(f.get(obj), v1beta1.ReasonBackendSetNotFound)
	})
	seed, err := ociemu.LoadSeedFile("testdata/seed.yaml")
	f.must(err)
	seed.LoadBalancers[0].BackendSets["later"] = seed.LoadBalancers[0].BackendSets["api"]
	f.must(f.emu.SeedState(seed))
	f.expectBackends(classicLB, "later", "10.0.34.1:31040/1")
}

// OCI answers 404 NotAuthorizedOrNotFound alike to a load balancer that
// does not exist and to one the identity may not read: a backend set's 404
// whose load balancer answers 404 too says so, and names the IAM policy to
// check, rather than a missing backend set.
func TestMissingLoadBalancerNamesThePolicy(t *testing.T) {
	f := newFixture(t, ociemu.Options{})
	f.node(f.ns+"-a", "10.0.36.1")
	f.startManager(f.options())
	obj := f.registrar("nowhere", "ocid1.networkloadbalancer.oc1.iad.nowhere", []v1beta1.Target{fixedPort("tcp", 31036)})
	f.eventually(20*time.Second, func() error {
		c := meta.FindStatusCondition(f.get(obj).Status.Conditions, v1beta1.ConditionReady)
		if c == nil || !strings.Contains(c.Message, "load balancer ocid1.networkloadbalancer.oc1.iad.nowhere not found, or the identity may not read it") ||
			!strings.Contains(c.Message, "use network-load-balancers") || strings.Contains(c.Message, `backend set "tcp" not found`) {
			return fmt.Errorf("ready: %+v", c)
		}
		return stalled(f.get(obj), v1beta1.ReasonNotAuthorizedOrNotFound)
	})
}

// stalled is nil when obj's Ready has reason and Stalled is True with it:
// a person must act, and the GitOps tools say so at once.
func stalled(obj *v1beta1.LBRegistrar, reason string) error {
	ready := meta.FindStatusCondition(obj.Status.Conditions, v1beta1.ConditionReady)
	st := meta.FindStatusCondition(obj.Status.Conditions, v1beta1.ConditionStalled)
	if ready == nil || ready.Reason != reason || st == nil || st.Status != metav1.ConditionTrue || st.Reason != reason {
		return fmt.Errorf("%s: Ready %+v, Stalled %+v; want both for %s", obj.Name, ready, st, reason)
	}
	return nil
}

// A work request OCI fails for bad input is not sent again unchanged:
// Ready says OCI's reason, its additions are tried again with backoff
// (not on every node event, while the other backend set follows them), and
// at once when the spec changes.
func TestRejectedWriteIsNotRepeated(t *testing.T) {
	f := newFixture(t, ociemu.Options{WorkRequestLatency: 10 * time.Millisecond})
	f.node(f.ns+"-a", "10.0.35.1")
	const reason = "backend 10.0.35.1:31050 is not in a subnet the load balancer can reach"
	rejecting := f.emu.AddFault(ociemu.Fault{Operation: "UpdateBackendSet", LoadBalancerID: classicLB, BackendSet: "admin",
		FailWorkRequest: true, FailCode: "BAD_INPUT", FailMessage: reason})
	o := f.options()
	o.Backoff.Max = 2 * time.Second
	f.startManager(o)
	obj := f.registrar("rejected", classicLB, []v1beta1.Target{fixedPort("admin", 31050), fixedPort("api", 31051)})

	f.expectBackends(classicLB, "api", "10.0.35.1:31051/1")
	f.waitReady(obj, v1beta1.ReasonWriteRefused, func(_ *v1beta1.LBRegistrar, ready *metav1.Condition) error {
		if !strings.Contains(ready.Message, reason) || !strings.Contains(ready.Message, "OCI refused adding 1 backends") {
			return fmt.Errorf("ready: %+v", ready)
		}
		return nil
	})
	refusedAt := time.Now()
	f.node(f.ns+"-b", "10.0.35.2")
	f.expectBackends(classicLB, "api", "10.0.35.1:31051/1", "10.0.35.2:31051/1")
	// Other additions (node b's) are tried at once; each the same refused
	// addition again only after 2 s, 4 s, ...
	if n, most := f.writesTo(classicLB, "admin"), 3+int(time.Since(refusedAt)/(2*time.Second)); n > most {
		t.Fatalf("the refused write was sent %d times in %s, want at most %d", n, time.Since(refusedAt), most)
	}

	f.emu.RemoveFault(rejecting)
	f.updateRegistrar(obj, func(o *v1beta1.LBRegistrar) { o.Spec.Services[0].NodePort = 31052 })
	f.expectBackends(classicLB, "admin", "10.0.35.1:31052/1", "10.0.35.2:31052/1")
}

// Additions OCI refuses for a limit never delay removals: a node that
// left is removed though the nodes that joined do not fit, Ready says what
// does not fit and lbregistrar_backends_withheld counts it, and they are
// added once they fit.
func TestRemovalsDoNotWaitForAdditionsThatDoNotFit(t *testing.T) {
	f := newFixture(t, ociemu.Options{WorkRequestLatency: 10 * time.Millisecond, BackendsPerBackendSet: 3})
	for i, n := range []string{"a", "b", "c"} {
		f.node(f.ns+"-"+n, fmt.Sprintf("10.0.46.%d", i+1))
	}
	f.startManager(f.options())
	obj := f.registrar("limited", classicLB, []v1beta1.Target{fixedPort("api", 31046)})
	f.expectBackends(classicLB, "api", "10.0.46.1:31046/1", "10.0.46.2:31046/1", "10.0.46.3:31046/1")

	// Two join, then one leaves: every write that adds, adds both (seen
	// one at a time, a join and the leave could fit in one write of three).
	f.node(f.ns+"-d", "10.0.46.4")
	f.node(f.ns+"-e", "10.0.46.5")
	f.eventually(20*time.Second, func() error {
		if n := counter(t, metrics.BackendsWithheld.WithLabelValues(obj.Name, "api")); n != 2 {
			return fmt.Errorf("lbregistrar_backends_withheld = %v, want 2", n)
		}
		return nil
	})
	f.must(k8s.Delete(f.ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: f.ns + "-c"}}))
	f.expectBackends(classicLB, "api", "10.0.46.1:31046/1", "10.0.46.2:31046/1")
	f.eventually(20*time.Second, func() error {
		c := meta.FindStatusCondition(f.get(obj).Status.Conditions, v1beta1.ConditionReady)
		if c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "LimitExceeded") || !strings.Contains(c.Message, "OCI refused adding 2 backends") {
			return fmt.Errorf("ready: %+v", c)
		}
		if n := counter(t, metrics.BackendsWithheld.WithLabelValues(obj.Name, "api")); n != 2 {
			return fmt.Errorf("lbregistrar_backends_withheld = %v, want 2", n)
		}
		return nil
	})

	f.must(k8s.Delete(f.ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: f.ns + "-e"}}))
	f.expectBackends(classicLB, "api", "10.0.46.1:31046/1", "10.0.46.2:31046/1", "10.0.46.4:31046/1")
	f.waitReady(obj, v1beta1.ReasonRegistered, func(*v1beta1.LBRegistrar, *metav1.Condition) error {
		if n := counter(t, metrics.BackendsWithheld.WithLabelValues(obj.Name, "api")); n != 0 {
			return fmt.Errorf("lbregistrar_backends_withheld = %v, want 0", n)
		}
		return nil
	})
}

// Each backend set gets the node addresses of the IP version it takes: an
// IPv6 NLB backend set the nodes' IPv6 addresses, in canonical form, and
// Degraded names the nodes that have none.
func TestBackendSetTakesAddressesOfItsIPVersion(t *testing.T) {
	f := newFixture(t, ociemu.Options{WorkRequestLatency: 10 * time.Millisecond})
	seed, err := ociemu.LoadSeedFile("testdata/seed.yaml")
	f.must(err)
	v6 := seed.NetworkLoadBalancers[0].BackendSets["tcp"]
	v6.IpVersion, v6.Backends = networkloadbalancer.IpVersionIpv6, nil
	seed.NetworkLoadBalancers[0].BackendSets["tcp6"] = v6
	f.must(f.emu.SeedState(seed))
	dual := f.node(f.ns+"-dual", "10.0.36.1")
	dual.Status.Addresses = append(dual.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "FD00:0:0::36:1"})
	f.must(k8s.Status().Update(f.ctx, dual))
	f.node(f.ns+"-v4", "10.0.36.2")
	f.startManager(f.options())
	obj := f.registrar("families", networkLB, []v1beta1.Target{fixedPort("tcp", 31060), fixedPort("tcp6", 31060)})

	f.expectBackends(networkLB, "tcp6", "fd00::36:1:31060/1")
	f.expectBackends(networkLB, "tcp", "192.168.9.9:30080/2,offline", "ocid1.instance.oc1.iad.someoneelse:30080/1",
		"10.0.36.1:31060/1", "10.0.36.2:31060/1")
	f.eventually(20*time.Second, func() error {
		c := meta.FindStatusCondition(f.get(obj).Status.Conditions, v1beta1.ConditionDegraded)
		if c == nil || c.Reason != "NodeWithoutAddress" || !strings.Contains(c.Message, f.ns+"-v4") || !strings.Contains(c.Message, "IPv6") {
			return fmt.Errorf("degraded: %+v", c)
		}
		return nil
	})
}

// OKE nodes with a global unicast IPv6 address report it as an
// ExternalIP, and Oracle's cloud controller manager registers it when a
// node has no IPv6 InternalIP (load_balancer_spec.go getBackends): so does
// lbregistrar. In a source-preserving IPv6 set the backend goes by address
// alone, as the CCM sends it (an instance OCID names its primary IPv4
// address, which the emulator refuses in an IPv6 set).
func TestIPv6ByExternalIPAsOraclesControllerRegistersIt(t *testing.T) {
	f := newFixture(t, ociemu.Options{WorkRequestLatency: 10 * time.Millisecond})
	seed, err := ociemu.LoadSeedFile("testdata/seed.yaml")
	f.must(err)
	v6 := seed.NetworkLoadBalancers[0].BackendSets["tcp"]
	v6.IpVersion, v6.IsPreserveSource, v6.Backends = networkloadbalancer.IpVersionIpv6, common.Bool(true), nil
	seed.NetworkLoadBalancers[0].BackendSets["tcp6"] = v6
	f.must(f.emu.SeedState(seed))
	gua := f.node(f.ns+"-gua", "10.0.38.1", func(n *corev1.Node) { n.Spec.ProviderID = "oci://ocid1.instance.oc1.iad.gua" })
	gua.Status.Addresses = append(gua.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "2603:c020:0:38::1"})
	f.must(k8s.Status().Update(f.ctx, gua))
	f.startManager(f.options())
	obj := f.registrar("gua", networkLB, []v1beta1.Target{fixedPort("tcp6", 31080)})

	f.expectBackends(networkLB, "tcp6", "2603:c020:0:38::1:31080/1")
	backends, err := f.emu.Backends(networkLB, "tcp6")
	f.must(err)
	if len(backends) != 1 || backends[0].TargetID != "" {
		t.Errorf("IPv6 backend sent with an instance: %+v", backends)
	}
	f.waitReady(obj, v1beta1.ReasonRegistered)
}

// seedUDPListener adds to the seeded NLB an empty backend set "udp", the
// default backend set of a UDP listener on port 53.
func (f *fixture) seedUDPListener() {
	f.t.Helper()
	seed, err := ociemu.LoadSeedFile("testdata/seed.yaml")
	f.must(err)
	nlb := &seed.NetworkLoadBalancers[0]
	udp := nlb.BackendSets["tcp"]
	udp.Backends = nil
	nlb.BackendSets["udp"] = udp
	nlb.Listeners = map[string]networkloadbalancer.Listener{"dns": {Name: common.String("dns"), DefaultBackendSetName: common.String("udp"),
		Port: common.Int(53), Protocol: networkloadbalancer.ListenerProtocolsUdp}}
	f.must(f.emu.SeedState(seed))
}

// An NLB listener may be UDP (SDK ListenerProtocolsEnum): the controller
// reads the listeners and registers, in the backend set a UDP listener
// uses, the node port of the Service's UDP port, where a Service gives one
// number to a TCP and a UDP port (DNS).
func TestUDPListenersGetTheServicesUDPPort(t *testing.T) {
	f := newFixture(t, ociemu.Options{WorkRequestLatency: 10 * time.Millisecond})
	f.seedUDPListener()
	f.node(f.ns+"-a", "10.0.40.1")
	svc := f.service("dns", corev1.ServicePort{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP},
		corev1.ServicePort{Name: "dns-udp", Port: 53, Protocol: corev1.ProtocolUDP})
	var udpPort int32
	for _, p := range svc.Spec.Ports {
		if p.Protocol == corev1.ProtocolUDP {
			udpPort = p.NodePort
		}
	}
	f.startManager(f.options())
	fiftyThree := intstr.FromInt32(53)
	obj := f.registrar("dns", networkLB, []v1beta1.Target{{Name: "dns", Namespace: f.ns, Port: &fiftyThree, BackendSetName: "udp", Weight: 1}})
	f.expectBackends(networkLB, "udp", fmt.Sprintf("10.0.40.1:%d/1", udpPort))
	f.waitReady(obj, v1beta1.ReasonRegistered)
}

// An NLB whose listeners cannot be read still has its backend sets read
// and written: only a target that picks a Service's port by protocol
// waits, Degraded saying why, until the listeners are read.
func TestUnreadListenersHoldOnlyServiceTargets(t *testing.T) {
	f := newFixture(t, ociemu.Options{WorkRequestLatency: 10 * time.Millisecond})
	f.seedUDPListener()
	unread := f.emu.AddFault(ociemu.Fault{Operation: "GetNetworkLoadBalancer", Status: 500})
	f.node(f.ns+"-a", "10.0.42.1")
	svc := f.service("dns", corev1.ServicePort{Name: "dns-udp", Port: 53, Protocol: corev1.ProtocolUDP})
	f.startManager(f.options())
	dns := intstr.FromString("dns-udp")
	obj := f.registrar("unread", networkLB, []v1beta1.Target{
		{Name: "dns", Namespace: f.ns, Port: &dns, BackendSetName: "udp", Weight: 1},
		fixedPort("tcp", 31042),
	})
	f.waitReady(obj, v1beta1.ReasonHeld, func(o *v1beta1.LBRegistrar, _ *metav1.Condition) error {
		if d := meta.FindStatusCondition(o.Status.Conditions, v1beta1.ConditionDegraded); d == nil || d.Reason != v1beta1.ReasonListenersUnread {
			return fmt.Errorf("degraded: %+v, want %s", d, v1beta1.ReasonListenersUnread)
		}
		return nil
	})
	f.expectBackends(networkLB, "tcp", "10.0.42.1:31042/1", "192.168.9.9:30080/2,offline", "ocid1.instance.oc1.iad.someoneelse:30080/1")
	f.expectBackends(networkLB, "udp")
	f.emu.RemoveFault(unread)
	f.updateRegistrar(obj, func(o *v1beta1.LBRegistrar) { o.Annotations = map[string]string{"touch": "1"} })
	f.expectBackends(networkLB, "udp", fmt.Sprintf("10.0.42.1:%d/1", svc.Spec.Ports[0].NodePort))
	f.waitReady(obj, v1beta1.ReasonRegistered)
}

// A backend set that preserves the client's source address takes nodes by
// instance: each backend names the node's instance OCID from spec.providerID
// (oci://… or bare); a node already registered by instance alone is seen,
// not added twice. (A node without an instance OCID, a self-managed
// cluster's, is sent by address, as the original operator did: OCI takes
// it or refuses the write, TestInstanceOnlyLoadBalancerSaysWhyANodeIsRefused.)
func TestSourcePreservingBackendSetTakesNodesByInstance(t *testing.T) {
	f := newFixture(t, ociemu.Options{WorkRequestLatency: 10 * time.Millisecond})
	seedPreserved(f, false)
	f.node(f.ns+"-a", "10.0.37.1", func(n *corev1.Node) { n.Spec.ProviderID = "oci://ocid1.instance.oc1.iad.node-a" })
	f.node(f.ns+"-b", "10.0.37.2", func(n *corev1.Node) { n.Spec.ProviderID = "ocid1.instance.oc1.iad.node-b" })
	f.startManager(f.options())
	obj := f.registrar("by-instance", networkLB, []v1beta1.Target{fixedPort("preserved", 31070)})

	f.expectBackends(networkLB, "preserved", "10.0.37.1:31070/1", "ocid1.instance.oc1.iad.node-b:31070/1")
	f.expectTarget(networkLB, "preserved", "10.0.37.1", "ocid1.instance.oc1.iad.node-a")
	f.waitReady(obj, v1beta1.ReasonRegistered)
}

// In a source-preserving set OCI takes an instance once per port. A node
// that keeps its instance while its address changes has its backend
// replaced in one write, at once, without waiting out a drain: the old
// address is no longer the instance's, and the new one would otherwise be
// a duplicate OCI refuses. Where another writer has registered the
// instance at another address, the backend is not added and Degraded says
// why.
func TestAnInstanceWhoseAddressChangesIsReaddressedInOneWrite(t *testing.T) {
	f := newFixture(t, ociemu.Options{WorkRequestLatency: 10 * time.Millisecond})
	seedPreserved(f, false)
	a := f.ns + "-a"
	f.node(a, "10.0.39.1", func(n *corev1.Node) { n.Spec.ProviderID = "oci://ocid1.instance.oc1.iad.node-a" })
	o := f.options()
	o.NodeDrainPeriod = time.Hour
	f.startManager(o)
	obj := f.registrar("readdress", networkLB, []v1beta1.Target{fixedPort("preserved", 31090)})
	f.expectBackends(networkLB, "preserved", "10.0.39.1:31090/1", "ocid1.instance.oc1.iad.node-b:31070/1")
	writes := f.emu.Counters().Writes[networkLB]

	var node corev1.Node
	f.must(k8s.Get(f.ctx, client.ObjectKey{Name: a}, &node))
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.39.9"}}
	f.must(k8s.Status().Update(f.ctx, &node))
	f.expectBackends(networkLB, "preserved", "10.0.39.9:31090/1", "ocid1.instance.oc1.iad.node-b:31070/1")
	if n := f.emu.Counters().Writes[networkLB] - writes; n != 1 {
		t.Errorf("%d writes to readdress the instance, want 1", n)
	}

	// Another writer's backend of instance b, at another address and this
	// port: node b is reported, not added.
	config, err := f.emu.NewUser()
	f.must(err)
	other, err := networkloadbalancer.NewNetworkLoadBalancerClientWithConfigurationProvider(config)
	f.must(err)
	other.Host = f.emu.URL()
	_, err = other.CreateBackend(f.ctx, networkloadbalancer.CreateBackendRequest{NetworkLoadBalancerId: common.String(networkLB),
		BackendSetName: common.String("preserved"), CreateBackendDetails: networkloadbalancer.CreateBackendDetails{
			IpAddress: common.String("10.0.39.20"), TargetId: common.String("ocid1.instance.oc1.iad.node-b"), Port: common.Int(31090)}})
	f.must(err)
	f.node(f.ns+"-b", "10.0.39.2", func(n *corev1.Node) { n.Spec.ProviderID = "ocid1.instance.oc1.iad.node-b" })
	f.eventually(20*time.Second, func() error {
		c := meta.FindStatusCondition(f.get(obj).Status.Conditions, v1beta1.ConditionDegraded)
		if c == nil || c.Reason != "InstanceRegistered" || !strings.Contains(c.Message, "10.0.39.2:31090") {
			return fmt.Errorf("degraded: %+v", c)
		}
		return nil
	})
}

// An NLB that preserves source and destination takes backends by instance
// only; a node without an instance OCID is still sent by address, and
// OCI's refusal is what Ready says, not a silent skip.
func TestInstanceOnlyLoadBalancerSaysWhyANodeIsRefused(t *testing.T) {
	f := newFixture(t, ociemu.Options{WorkRequestLatency: 10 * time.Millisecond})
	seedPreserved(f, true)
	f.node(f.ns+"-c", "10.0.38.3")
	f.startManager(f.options())
	obj := f.registrar("by-address", networkLB, []v1beta1.Target{fixedPort("preserved", 31070)})
	f.eventually(20*time.Second, func() error {
		c := meta.FindStatusCondition(f.get(obj).Status.Conditions, v1beta1.ConditionReady)
		if c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "by instance (targetId) only") {
			return fmt.Errorf("ready: %+v", c)
		}
		return nil
	})
	f.expectBackends(networkLB, "preserved", "ocid1.instance.oc1.iad.node-b:31070/1")
}

// expectTarget fails the test unless the backend at ip names target as
// its targetId.
func (f *fixture) expectTarget(lb, set, ip, target string) {
	f.t.Helper()
	backends, err := f.emu.Backends(lb, set)
	f.must(err)
	if !slices.ContainsFunc(backends, func(b ociemu.Backend) bool { return b.IPAddress == ip && b.TargetID == target }) {
		f.t.Errorf("%s not registered as %s: %+v", ip, target, backends)
	}
}

// seedPreserved seeds networkLB with a backend set "preserved" that
// preserves the client's source address and has node-b registered by
// instance alone; sourceDestination makes the load balancer preserve
// source and destination, which takes backends by instance only.
func seedPreserved(f *fixture, sourceDestination bool) {
	seed, err := ociemu.LoadSeedFile("testdata/seed.yaml")
	f.must(err)
	nlb := &seed.NetworkLoadBalancers[0]
	nlb.IsPreserveSourceDestination = common.Bool(sourceDestination)
	preserved := nlb.BackendSets["tcp"]
	preserved.IsPreserveSource = common.Bool(true)
	preserved.Backends = []networkloadbalancer.Backend{{TargetId: common.String("ocid1.instance.oc1.iad.node-b"), Port: common.Int(31070)}}
	nlb.BackendSets["preserved"] = preserved
	if sourceDestination {
		delete(nlb.BackendSets, "tcp") // an address-only backend, and isPreserveSource false: OCI refuses both there
	}
	f.must(f.emu.SeedState(seed))
}

// Another writer (another cluster, Terraform, the console) has a work
// request in flight on a network load balancer when the controller writes:
// OCI answers 409 until it ends. The controller waits for it, then writes,
// and spends no attempt on it: with one attempt allowed, the write still
// succeeds, with no WriteFailed.
func TestAnotherWritersWorkRequestIsWaitedOut(t *testing.T) {
	f := newFixture(t, ociemu.Options{WorkRequestLatency: 10 * time.Millisecond})
	f.node(f.ns+"-a", "10.0.44.1")
	o := f.options()
	o.Backoff.Attempts = 1
	f.startManager(o)
	other := f.otherNLBWriter()
	before := f.backends(networkLB, "tcp")

	// The other writer's work request stays in progress until released.
	stuck := f.emu.AddFault(ociemu.Fault{Operation: "CreateBackend", LoadBalancerID: networkLB, StuckUpdating: true})
	_, err := other.CreateBackend(f.ctx, networkloadbalancer.CreateBackendRequest{NetworkLoadBalancerId: common.String(networkLB), BackendSetName: common.String("tcp"),
		CreateBackendDetails: networkloadbalancer.CreateBackendDetails{IpAddress: common.String("192.168.44.4"), Port: common.Int(30044), Weight: common.Int(1)}})
	f.must(err)
	obj := f.registrar("behind", networkLB, []v1beta1.Target{fixedPort("tcp", 30044)})
	f.eventually(10*time.Second, func() error {
		if f.emu.Counters().Conflicts == 0 {
			return fmt.Errorf("no write answered 409 yet")
		}
		return nil
	})
	time.Sleep(300 * time.Millisecond) // the controller is waiting, not retrying
	f.emu.RemoveFault(stuck)

	f.expectBackends(networkLB, "tcp", append(before, "192.168.44.4:30044/1", "10.0.44.1:30044/1")...)
	f.waitReady(obj, v1beta1.ReasonRegistered)
	var evs eventsv1.EventList
	f.must(k8s.List(f.ctx, &evs, client.InNamespace(metav1.NamespaceDefault)))
	for _, e := range evs.Items {
		if e.Regarding.Name == obj.Name && (e.Reason == v1beta1.ReasonWriteFailed || e.Reason == v1beta1.ReasonWriteRefused) {
			t.Errorf("a write failed behind another writer's work request: %s", e.Note)
		}
	}
	if n := f.emu.Counters().Conflicts; n != 1 {
		t.Errorf("%d writes answered 409, want 1: the controller waited rather than retried", n)
	}
}

// Another writer (another cluster whose resource also registered the node,
// on its way out) drains a backend this resource wants, then removes it:
// each time the controller notices within the watch period, long before
// its resync, and puts the backend back. Its own writes wake nothing: once
// after a write of its own, the watch lists the load balancer's work
// requests and nothing reads a backend set.
func TestAnotherWritersChangeIsPutBack(t *testing.T) {
	f := newFixture(t, ociemu.Options{WorkRequestLatency: 10 * time.Millisecond})
	f.node(f.ns+"-a", "10.0.45.1")
	o := f.options()
	o.Resync = time.Hour
	o.WatchPeriod = 100 * time.Millisecond
	f.startManager(o)
	other := f.otherNLBWriter()
	before := f.backends(networkLB, "tcp")
	obj := f.registrar("wants", networkLB, []v1beta1.Target{fixedPort("tcp", 30045)})
	want := append(before, "10.0.45.1:30045/1")
	f.expectBackends(networkLB, "tcp", want...)
	f.waitReady(obj, v1beta1.ReasonRegistered)

	// A node joins: the write that adds it is the controller's own, and its
	// end wakes nothing.
	calls := func(op string) int {
		n := 0
		for _, c := range f.emu.Calls() {
			if c.Operation == op {
				n++
			}
		}
		return n
	}
	f.eventually(10*time.Second, func() error { // the watch has had its first look
		if calls("ListWorkRequests") == 0 {
			return fmt.Errorf("the load balancer's work requests were not listed yet")
		}
		return nil
	})
	f.node(f.ns+"-b", "10.0.45.2")
	want = append(want, "10.0.45.2:30045/1")
	f.expectBackends(networkLB, "tcp", want...)
	settled := calls("GetBackendSet")
	time.Sleep(time.Second)
	if n := calls("GetBackendSet") - settled; n != 0 {
		t.Errorf("%d backend set reads after the controller's own write: the watch took it for another writer's", n)
	}

	// done waits until the other writer's work request has succeeded: its
	// change was made, whether or not it is still there.
	done := func(id *string) {
		f.eventually(10*time.Second, func() error {
			wr, err := other.GetWorkRequest(f.ctx, networkloadbalancer.GetWorkRequestRequest{WorkRequestId: id})
			if err != nil || wr.Status != networkloadbalancer.OperationStatusSucceeded {
				return fmt.Errorf("the other writer's work request: %v %w", wr.Status, err)
			}
			return nil
		})
	}
	backend := common.String("10.0.45.1:30045")
	drained, err := other.UpdateBackend(f.ctx, networkloadbalancer.UpdateBackendRequest{NetworkLoadBalancerId: common.String(networkLB), BackendSetName: common.String("tcp"),
		BackendName: backend, UpdateBackendDetails: networkloadbalancer.UpdateBackendDetails{IsDrain: common.Bool(true)}})
	f.must(err)
	done(drained.OpcWorkRequestId)
	f.expectBackends(networkLB, "tcp", want...)

	removed, err := other.DeleteBackend(f.ctx, networkloadbalancer.DeleteBackendRequest{NetworkLoadBalancerId: common.String(networkLB), BackendSetName: common.String("tcp"), BackendName: backend})
	f.must(err)
	done(removed.OpcWorkRequestId)
	f.expectBackends(networkLB, "tcp", want...)
}

// A backend set OCI lets have fewer backends than are wanted (a
// non-preemptive NLB pair) is filled to its limit, in backend order, with
// no write OCI would refuse; Degraded and the withheld gauge say what does
// not fit, and a freed place is taken at once.
func TestBackendSetIsFilledToItsLimit(t *testing.T) {
	f := newFixture(t, ociemu.Options{WorkRequestLatency: 10 * time.Millisecond})
	seed, err := ociemu.LoadSeedFile("testdata/seed.yaml")
	f.must(err)
	pair := seed.NetworkLoadBalancers[0].BackendSets["tcp"]
	pair.AreOperationallyActiveBackendsPreferred, pair.Backends = common.Bool(true), nil
	seed.NetworkLoadBalancers[0].BackendSets["pair"] = pair
	f.must(f.emu.SeedState(seed))
	for i, n := range []string{"a", "b", "c"} {
		f.node(f.ns+"-"+n, fmt.Sprintf("10.0.47.%d", i+1))
	}
	f.startManager(f.options())
	obj := f.registrar("pair", networkLB, []v1beta1.Target{fixedPort("pair", 31047)})
	f.expectBackends(networkLB, "pair", "10.0.47.1:31047/1", "10.0.47.2:31047/1")
	f.eventually(20*time.Second, func() error {
		o := f.get(obj)
		if c := meta.FindStatusCondition(o.Status.Conditions, v1beta1.ConditionDegraded); c == nil || c.Reason != v1beta1.ReasonBackendLimit || !strings.Contains(c.Message, "wanted to have 3 backends; OCI lets it have 2") {
			return fmt.Errorf("degraded: %+v", c)
		}
		if c := meta.FindStatusCondition(o.Status.Conditions, v1beta1.ConditionReady); c == nil || strings.Contains(c.Message, "LimitExceeded") {
			return fmt.Errorf("ready (no write OCI refuses is sent): %+v", c)
		}
		if n := counter(t, metrics.BackendsWithheld.WithLabelValues(obj.Name, "pair")); n != 1 {
			return fmt.Errorf("lbregistrar_backends_withheld = %v, want 1", n)
		}
		if n := counter(t, metrics.BackendLimitUsed.WithLabelValues(obj.Name, "pair")); n != 1.5 {
			return fmt.Errorf("lbregistrar_backend_limit_used_ratio = %v, want 1.5", n)
		}
		return nil
	})

	f.must(k8s.Delete(f.ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: f.ns + "-a"}}))
	f.expectBackends(networkLB, "pair", "10.0.47.2:31047/1", "10.0.47.3:31047/1")
	f.eventually(20*time.Second, func() error {
		if c := meta.FindStatusCondition(f.get(obj).Status.Conditions, v1beta1.ConditionDegraded); c == nil || c.Status != metav1.ConditionFalse {
			return fmt.Errorf("degraded: %+v", c)
		}
		return nil
	})
}

// otherNLBWriter is an NLB client of another OCI user: another cluster,
// Terraform, the console.
func (f *fixture) otherNLBWriter() networkloadbalancer.NetworkLoadBalancerClient {
	f.t.Helper()
	config, err := f.emu.NewUser()
	f.must(err)
	other, err := networkloadbalancer.NewNetworkLoadBalancerClientWithConfigurationProvider(config)
	f.must(err)
	other.Host = f.emu.URL()
	return other
}
