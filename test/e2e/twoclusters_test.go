package e2e

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/test/eventually"
	"github.com/peppy-ratio/lbregistrar/test/kube"
	"github.com/peppy-ratio/lbregistrar/test/ociemu"
)

// Two clusters (blue and green) register their nodes in one backend set
// of one load balancer, each with its own lbregistrar and the default
// flags, created at the same moment, with OCI's work requests taking 15 s
// as real ones often do; one node address is in both. Each registers only
// its own nodes and never removes the other's: the union is registered,
// the foreign backend stays, and plan in one cluster reports the other's
// node and the foreign backend as recorded by no resource of it. The
// cluster whose write OCI answered 409 waits out the other's work request
// instead of spending attempts: both are Ready within one work request of
// the other plus one of their own, and no write fails.
//
// Deleting blue's resource drains its backends, then removes only blue's
// own. Green notices within its watch period, not at its resync, that the
// shared address it wants was drained, says Ready=False while it puts it
// back into service, and the address stays registered throughout.
func TestTwoClustersShareABackendSet(t *testing.T) {
	t.Parallel()
	const latency = 15 * time.Second
	emu := seededEmulator(t, mustRoot(t)+"/cmd/localrun/seed.yaml", latency)
	type cluster struct {
		name  string
		c     *kube.Cluster
		nodes map[string]string
	}
	clusters := []*cluster{
		{name: "blue", nodes: map[string]string{"blue-a": "10.0.0.1", "shared": "10.0.0.2"}},
		{name: "green", nodes: map[string]string{"green-a": "10.0.1.1", "shared": "10.0.0.2"}},
	}
	for _, cl := range clusters {
		cl.c = kube.Start(t, kube.Options{Bare: true})
		kubectl(t, cl.c, "", "create", "namespace", kube.Namespace)
		for name, ip := range cl.nodes {
			addNode(t, cl.c, name, ip)
		}
		serveAdmitting(t, cl.c, emu)
	}
	blue, green := clusters[0].c, clusters[1].c
	objects := []string{apiKeyFor(t, blue, emu, classicIngressRegistrar), apiKeyFor(t, green, emu, classicIngressRegistrar)}
	start := time.Now()
	var wg sync.WaitGroup
	for i, cl := range clusters {
		wg.Go(func() { kubectl(t, cl.c, objects[i], "apply", "-f", "-") })
	}
	wg.Wait()
	// One work request of the other's, one of its own, each found ended
	// within a poll (--work-request-poll-max, 10 s) of its end.
	within := 2*(latency+10*time.Second) + 10*time.Second
	for _, c := range []*kube.Cluster{blue, green} {
		waitAllReady(t, c, 1, within-time.Since(start))
	}
	t.Logf("both clusters Ready %s after applying, at %s work requests", time.Since(start).Round(time.Second), latency)
	if n := emu.Counters().Conflicts; n == 0 {
		t.Errorf("no write was answered 409: the clusters did not write at once, so nothing was waited out")
	}
	everyone := []string{"10.0.0.1:30443", "10.0.0.2:30443", "10.0.0.99:30443", "10.0.1.1:30443"}
	waitBackends(t, emu, "ingress", time.Minute, everyone...)

	out, status := runPlan(t, "--kubeconfig", green.Kubeconfig, "--oci-loadbalancer-endpoint="+emu.URL(), "--oci-networkloadbalancer-endpoint="+emu.URL(), "--oci-core-endpoint="+emu.URL())
	for _, want := range []string{"backend set ingress: no change", "ingress 10.0.0.1:30443 weight 1", "ingress 10.0.0.99:30443 weight 1"} {
		if status != 0 || !strings.Contains(out, want) {
			t.Errorf("green's plan (exit %d) does not say %q:\n%s", status, want, out)
		}
	}
	if strings.Contains(out, "ingress 10.0.1.1:30443") || strings.Contains(out, "ingress 10.0.0.2:30443") {
		t.Errorf("green's plan reports its own nodes as unrecorded:\n%s", out)
	}

	// The shared address must stay registered throughout, and green says
	// Ready only while it is in service, but for the moments before its
	// watch looks again.
	var untrue untruth
	stop := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		untrue.watch(t, emu, green, stop)
	}()
	kubectl(t, blue, "", "delete", "lbregistrar", "legit", "--wait=false")
	// Blue drains its own; green serves the shared address again before
	// blue's drain period ends: within its watch period (10 s), one work
	// request and a poll (10 s).
	settle := latency + 30*time.Second
	waitBackends(t, emu, "ingress", settle, "10.0.0.1:30443,drain", "10.0.0.2:30443,drain", "10.0.0.99:30443", "10.0.1.1:30443")
	waitBackends(t, emu, "ingress", settle, "10.0.0.1:30443,drain", "10.0.0.2:30443", "10.0.0.99:30443", "10.0.1.1:30443")
	kubectl(t, blue, "", "wait", "--for=delete", "lbregistrar/legit", "--timeout=3m")
	waitBackends(t, emu, "ingress", time.Minute, "10.0.0.2:30443", "10.0.0.99:30443", "10.0.1.1:30443")
	waitAllReady(t, green, 1, time.Minute)
	close(stop)
	<-watched
	if untrue.missing != "" {
		t.Errorf("the shared address was removed while green wants it: %s", untrue.missing)
	}
	// Green's watch lists every 10 s (--oci-watch-period); its reconcile
	// then says Ready=False before it writes.
	if limit := 10*time.Second + 5*time.Second; untrue.longest > limit {
		t.Errorf("green said Ready=True for %s while the shared address was drained, more than %s", untrue.longest, limit)
	}
	t.Logf("green said Ready=True for at most %s while the shared address was out of service", untrue.longest)
	for _, c := range []*kube.Cluster{blue, green} {
		var evs eventsv1.EventList
		if err := c.Client.List(testContext(t), &evs); err != nil {
			t.Fatal(err)
		}
		for _, e := range evs.Items {
			if e.Reason == "WriteFailed" || e.Reason == "WriteRefused" {
				t.Errorf("a write failed: %s %s", e.Regarding.Name, e.Note)
			}
		}
	}
}

// untruth measures what green's Ready claims while the shared address is
// out of service.
type untruth struct {
	missing string        // the backends when the shared address was gone
	longest time.Duration // longest Ready=True while it was drained or gone
}

// watch samples the backend set and green's Ready until stop.
func (u *untruth) watch(t *testing.T, emu *ociemu.Emulator, green *kube.Cluster, stop <-chan struct{}) {
	ctx := testContext(t)
	var since time.Time // when Ready=True over a drained address began
	for {
		select {
		case <-stop:
			return
		case <-time.After(100 * time.Millisecond):
		}
		backends, err := emu.Backends(classicIngress, "ingress")
		if err != nil {
			continue
		}
		i := slices.IndexFunc(backends, func(b ociemu.Backend) bool { return b.IPAddress == "10.0.0.2" })
		if i < 0 && u.missing == "" {
			u.missing = fmt.Sprint(backends)
		}
		var obj v1beta1.LBRegistrar
		if err := green.Client.Get(ctx, client.ObjectKey{Name: "legit"}, &obj); err != nil {
			continue
		}
		ready := meta.IsStatusConditionTrue(obj.Status.Conditions, v1beta1.ConditionReady)
		switch out := i < 0 || backends[i].Drain; {
		case out && ready && since.IsZero():
			since = time.Now()
		case out && ready:
			u.longest = max(u.longest, time.Since(since))
		default:
			since = time.Time{}
		}
	}
}

// waitBackends waits until backend set set of the classic load balancer
// has exactly want (ip:port, ",drain" when drained) within the time given.
func waitBackends(t testing.TB, emu *ociemu.Emulator, set string, within time.Duration, want ...string) {
	t.Helper()
	slices.Sort(want)
	eventually.Passes(t, within, 50*time.Millisecond, func() error {
		backends, err := emu.Backends(classicIngress, set)
		if err != nil {
			return err
		}
		var got []string
		for _, b := range backends {
			s := fmt.Sprintf("%s:%d", b.IPAddress, b.Port)
			if b.Drain {
				s += ",drain"
			}
			got = append(got, s)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			return fmt.Errorf("%s has %v, want %v", set, got, want)
		}
		return nil
	})
}

func mustRoot(t testing.TB) string {
	t.Helper()
	root, err := kube.FindRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}
