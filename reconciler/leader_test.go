package reconciler_test

import (
	"fmt"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/test/ociemu"
)

func (f *fixture) leaderElection(o *ctrl.Options) {
	lease, renew, retry := 2*time.Second, 1500*time.Millisecond, 200*time.Millisecond
	o.LeaderElection = true
	o.LeaderElectionID = "lbregistrar-" + f.ns
	o.LeaderElectionNamespace = f.ns
	o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = &lease, &renew, &retry
	o.LeaderElectionReleaseOnCancel = true
}

// countNothingToWrite counts, in n, the reconciles in which the manager found
// a backend set already listing what its resource owns. Only its log tells:
// a reconcile that writes nothing leaves no other trace, in OCI or in the
// resource's status.
func countNothingToWrite(n *atomic.Int32) func(*ctrl.Options) {
	return func(o *ctrl.Options) {
		o.Logger = funcr.New(func(_, args string) {
			if strings.Contains(args, "backend set already lists what this resource owns; nothing to write") {
				n.Add(1)
			}
		}, funcr.Options{Verbosity: 1})
	}
}

func elected(t *testing.T, mgr ctrl.Manager, within time.Duration) bool {
	t.Helper()
	select {
	case <-mgr.Elected():
		return true
	case <-time.After(within):
		return false
	}
}

// The leader is stopped while its work request runs: it still waits for the
// work request and records it, and the new leader finds nothing to write.
func TestLeaderStoppedMidWriteNoDuplicateWrite(t *testing.T) {
	f := newFixture(t, ociemu.Options{WorkRequestLatency: 1500 * time.Millisecond})
	f.node(f.ns+"-a", "10.0.9.1")
	f.node(f.ns+"-b", "10.0.9.2")
	leader, stopLeader := f.startManager(f.options(), f.leaderElection)
	if !elected(t, leader, 10*time.Second) {
		t.Fatal("first manager not elected")
	}
	var standbyFoundNothingToWrite atomic.Int32
	standby, _ := f.startManager(f.options(), f.leaderElection, countNothingToWrite(&standbyFoundNothingToWrite))
	if elected(t, standby, 500*time.Millisecond) {
		t.Fatal("two leaders")
	}

	obj := f.registrar("le", classicLB, []v1beta1.Target{fixedPort("api", 30100)})
	f.eventually(10*time.Second, func() error {
		if f.emu.Counters().Writes[classicLB] == 0 {
			return fmt.Errorf("no write accepted yet")
		}
		return nil
	})
	if got := f.backends(classicLB, "api"); len(got) != 0 {
		t.Fatalf("the work request already finished (%v); the leader was not stopped mid-write", got)
	}
	stopLeader()
	if !elected(t, standby, 10*time.Second) {
		t.Fatal("standby not elected after the leader stopped")
	}
	f.expectBackends(classicLB, "api", "10.0.9.1:30100/1", "10.0.9.2:30100/1")
	f.eventually(10*time.Second, func() error {
		o := f.get(obj)
		if len(o.Status.BackendSets) != 1 || o.Status.BackendSets[0].OwnedCount() != 2 ||
			o.Status.BackendSets[0].LastWorkRequest == nil || o.Status.BackendSets[0].LastWorkRequest.Status != "SUCCEEDED" {
			return fmt.Errorf("record: %+v", o.Status.BackendSets)
		}
		return nil
	})

	// The new leader reconciles (an annotation change makes sure) and writes nothing new.
	decided := standbyFoundNothingToWrite.Load()
	f.updateRegistrar(obj, func(o *v1beta1.LBRegistrar) { o.Annotations = map[string]string{"touch": "1"} })
	f.eventually(10*time.Second, func() error {
		if standbyFoundNothingToWrite.Load() == decided {
			return fmt.Errorf("no reconcile by the new leader has found nothing to write yet")
		}
		return nil
	})
	if n := f.emu.Counters().Writes[classicLB]; n != 1 {
		t.Fatalf("%d writes, want exactly 1", n)
	}
}

// The leader is killed (its connections to the API server and to OCI cut at
// once, as when its process dies) while its work request runs: the next
// leader finishes the registration without writing it a second time.
func TestLeaderKilledMidWriteNoDuplicateWrite(t *testing.T) {
	f := newFixture(t, ociemu.Options{WorkRequestLatency: 1500 * time.Millisecond})
	f.node(f.ns+"-a", "10.0.15.1")
	f.node(f.ns+"-b", "10.0.15.2")

	kube := startProxy(t, hostPort(t, restConfig.Host))
	cloud := startProxy(t, hostPort(t, f.emu.HTTPSURL()))
	viaKube := rest.CopyConfig(restConfig)
	viaKube.Host = "https://" + kube.addr()
	doomed := f.options()
	doomed.OCI.LoadBalancerEndpoint = "https://" + cloud.addr()
	doomed.OCI.NetworkLoadBalancerEndpoint = doomed.OCI.LoadBalancerEndpoint
	doomed.OCI.CoreEndpoint = doomed.OCI.LoadBalancerEndpoint
	doomed.WorkRequestTimeout = 3 * time.Second
	leader, _ := f.startManagerOn(viaKube, true, doomed, f.leaderElection)
	if !elected(t, leader, 10*time.Second) {
		t.Fatal("first manager not elected")
	}
	standby, _ := f.startManager(f.options(), f.leaderElection)

	obj := f.registrar("killed", classicLB, []v1beta1.Target{fixedPort("api", 30600)})
	f.eventually(10*time.Second, func() error {
		if f.emu.Counters().Writes[classicLB] == 0 {
			return fmt.Errorf("no write accepted yet")
		}
		return nil
	})
	if got := f.backends(classicLB, "api"); len(got) != 0 {
		t.Fatalf("the work request already finished (%v); the leader was not killed mid-write", got)
	}
	kube.kill()
	cloud.kill()

	if !elected(t, standby, 15*time.Second) {
		t.Fatal("standby not elected after the leader died")
	}
	f.expectBackends(classicLB, "api", "10.0.15.1:30600/1", "10.0.15.2:30600/1")
	f.waitReady(obj, v1beta1.ReasonRegistered, func(o *v1beta1.LBRegistrar, _ *metav1.Condition) error {
		if len(o.Status.BackendSets) != 1 || o.Status.BackendSets[0].OwnedCount() != 2 {
			return fmt.Errorf("ownership record: %+v", o.Status.BackendSets)
		}
		return nil
	})
	if n := f.emu.Counters().Writes[classicLB]; n != 1 {
		t.Fatalf("%d writes, want exactly 1", n)
	}
}

func hostPort(t *testing.T, rawURL string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}
