package reconciler_test

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/test/ociemu"
)

// freePort is a port no one listens on at 127.0.0.1 as it returns, which
// the tests' backends listen on at their loopback stand-ins.
func freePort(t *testing.T) int32 {
	t.Helper()
	probe, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	return int32(probe.Addr().(*net.TCPAddr).Port)
}

// listen accepts and closes connections at addr until the test ends or
// the returned func is called.
func listen(t *testing.T, addr string) (stop func()) {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	go acceptAndClose(l, nil)
	t.Cleanup(func() { l.Close() })
	return func() { l.Close() }
}

// acceptAndClose accepts connections on l and closes each, calling
// accepted (when given) for each, until l is closed.
func acceptAndClose(l net.Listener, accepted func()) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		if accepted != nil {
			accepted()
		}
		c.Close()
	}
}

// OCI's health checks of the node ports this resource registered show in
// its status and follow the nodes: a node port that does not answer is
// CRITICAL and makes Degraded True, one that starts answering turns OK, and
// one that stops answering turns CRITICAL again. Ready stays True: the
// registration itself is what it should be. The foreign backend in the set,
// which OCI reports UNKNOWN, is not counted.
func TestHealthInStatus(t *testing.T) {
	f := newFixture(t, ociemu.Options{})
	port := int(freePort(t))
	listen(t, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	f.node(f.ns+"-up", "127.0.0.1")
	f.node(f.ns+"-down", "127.0.0.2")
	down := "127.0.0.2:" + strconv.Itoa(port)

	o := f.options()
	o.Resync = 100 * time.Millisecond // health is read on each resync
	f.startManager(o)
	obj := f.registrar("health", classicLB, []v1beta1.Target{fixedPort("health", int32(port))})

	expect := func(healthy string, unhealthy ...string) {
		t.Helper()
		f.waitReady(obj, v1beta1.ReasonRegistered, func(cur *v1beta1.LBRegistrar, _ *metav1.Condition) error {
			var rec *v1beta1.BackendSetStatus
			for i := range cur.Status.BackendSets {
				if cur.Status.BackendSets[i].Name == "health" {
					rec = &cur.Status.BackendSets[i]
				}
			}
			if rec == nil || rec.Health == nil {
				return fmt.Errorf("no health recorded: %+v", cur.Status.BackendSets)
			}
			h := rec.Health
			if cur.Status.Healthy != healthy || !slices.Equal(h.Unhealthy, unhealthy) || int(h.Critical) != len(unhealthy) || h.Unknown != 0 {
				return fmt.Errorf("healthy %q, health %+v; want %s with %v critical", cur.Status.Healthy, *h, healthy, unhealthy)
			}
			d := meta.FindStatusCondition(cur.Status.Conditions, v1beta1.ConditionDegraded)
			switch {
			case d == nil:
				return fmt.Errorf("no Degraded condition")
			case len(unhealthy) > 0 && (d.Status != metav1.ConditionTrue || d.Reason != v1beta1.ReasonBackendsUnhealthy || !strings.Contains(d.Message, down)):
				return fmt.Errorf("Degraded: %+v, want True naming %s", d, down)
			case len(unhealthy) == 0 && d.Status != metav1.ConditionFalse:
				return fmt.Errorf("Degraded: %+v, want False", d)
			}
			return nil
		})
	}

	expect("1/2", down)
	f.expectBackends(classicLB, "health", "127.0.0.1:"+strconv.Itoa(port)+"/1", down+"/1", "192.168.9.9:30999/1")
	stop := listen(t, down)
	expect("2/2")
	stop()
	expect("1/2", down)
	// Health changes wrote nothing: the one write registered both nodes.
	writes := 0
	for _, c := range f.emu.Calls() {
		if c.Operation == "UpdateBackendSet" && c.LoadBalancerID == classicLB {
			writes++
		}
	}
	if writes != 1 {
		t.Errorf("%d backend set writes, want the one that registered the nodes", writes)
	}
}

// A health read that fails fails nothing else: the resource is Ready and
// not Degraded, and the backend set shows no health.
func TestHealthReadFailureIsNoFailure(t *testing.T) {
	f := newFixture(t, ociemu.Options{})
	f.emu.AddFault(ociemu.Fault{Operation: "GetBackendSetHealth", Status: 500})
	f.node(f.ns+"-a", "10.0.3.1")
	f.startManager(f.options())
	obj := f.registrar("health-fails", classicLB, []v1beta1.Target{fixedPort("health", 30123)})
	f.waitReady(obj, v1beta1.ReasonRegistered, func(cur *v1beta1.LBRegistrar, _ *metav1.Condition) error {
		if cur.Status.ObservedGeneration != cur.Generation {
			return fmt.Errorf("status of generation %d, want %d", cur.Status.ObservedGeneration, cur.Generation)
		}
		if d := meta.FindStatusCondition(cur.Status.Conditions, v1beta1.ConditionDegraded); d == nil || d.Status != metav1.ConditionFalse {
			return fmt.Errorf("Degraded: %+v", d)
		}
		if cur.Status.Healthy != "" || len(cur.Status.BackendSets) != 1 || cur.Status.BackendSets[0].Health != nil {
			return fmt.Errorf("health shown although it could not be read: %q %+v", cur.Status.Healthy, cur.Status.BackendSets)
		}
		return nil
	})
	// Each reconcile reads the backend set before anything else, and its
	// health at most once, failed or not.
	reads, healthReads := 0, 0
	for _, c := range f.emu.Calls() {
		switch c.Operation {
		case "GetBackendSet":
			reads++
		case "GetBackendSetHealth":
			healthReads++
		}
	}
	if healthReads == 0 || healthReads > reads {
		t.Errorf("%d health reads in %d reconciles' worth of backend set reads, want 1 to %d", healthReads, reads, reads)
	}
}

// With --backend-health=false nothing but the backend sets is read, and
// the status shows no health, also none an earlier run recorded.
func TestBackendHealthOff(t *testing.T) {
	f := newFixture(t, ociemu.Options{})
	f.node(f.ns+"-a", "10.0.3.2")
	_, stop := f.startManager(f.options())
	obj := f.registrar("health-off", classicLB, []v1beta1.Target{fixedPort("health", 30124)})
	f.eventually(20*time.Second, func() error {
		if cur := f.get(obj); cur.Status.Healthy == "" {
			return fmt.Errorf("no health in status yet: %+v", cur.Status)
		}
		return nil
	})
	stop()
	o := f.options()
	o.BackendHealth = false
	f.startManager(o)
	healthReads := func() int {
		n := 0
		for _, c := range f.emu.Calls() {
			if c.Operation == "GetBackendSetHealth" {
				n++
			}
		}
		return n
	}
	before := healthReads()
	f.updateRegistrar(obj, func(o *v1beta1.LBRegistrar) { o.Annotations = map[string]string{"touch": "1"} })
	f.eventually(20*time.Second, func() error {
		cur := f.get(obj)
		if cur.Status.Healthy != "" || len(cur.Status.BackendSets) != 1 || cur.Status.BackendSets[0].Health != nil {
			return fmt.Errorf("health still shown: %q %+v", cur.Status.Healthy, cur.Status.BackendSets)
		}
		return nil
	})
	if n := healthReads() - before; n != 0 {
		t.Errorf("%d health reads with --backend-health=false", n)
	}
}
