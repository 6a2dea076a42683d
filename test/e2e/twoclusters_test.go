package e2e

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/peppy-ratio/lbregistrar/test/eventually"
	"github.com/peppy-ratio/lbregistrar/test/kube"
	"github.com/peppy-ratio/lbregistrar/test/ociemu"
)

// Two clusters (blue and green) register their nodes in one backend set
// of one load balancer, each with its own lbregistrar, created at the same
// moment; one node address is in both. Each registers only its own nodes
// and never removes the other's: the union is registered, the foreign
// backend stays, and plan in one cluster reports the other's node and the
// foreign backend as recorded by no resource of it. Deleting blue's
// resource drains its backends, then removes only blue's own; the shared
// address, which green takes back into service during the drain period,
// stays registered and serving.
func TestTwoClustersShareABackendSet(t *testing.T) {
	t.Parallel()
	emu := seededEmulator(t, mustRoot(t)+"/cmd/localrun/seed.yaml", 0)
	type cluster struct {
		name  string
		c     *kube.Cluster
		nodes map[string]string
		args  []string
	}
	clusters := []*cluster{
		{name: "blue", nodes: map[string]string{"blue-a": "10.0.0.1", "shared": "10.0.0.2"}, args: []string{"--drain-period=10s"}},
		{name: "green", nodes: map[string]string{"green-a": "10.0.1.1", "shared": "10.0.0.2"}, args: []string{"--resync-period=1s"}},
	}
	var wg sync.WaitGroup
	for _, cl := range clusters {
		cl.c = kube.Start(t, kube.Options{Bare: true})
		kubectl(t, cl.c, "", "create", "namespace", kube.Namespace)
		for name, ip := range cl.nodes {
			addNode(t, cl.c, name, ip)
		}
		serveAdmitting(t, cl.c, emu, cl.args...)
	}
	objects := []string{apiKeyFor(t, clusters[0].c, emu, classicIngressRegistrar), apiKeyFor(t, clusters[1].c, emu, classicIngressRegistrar)}
	for i, cl := range clusters {
		wg.Go(func() { kubectl(t, cl.c, objects[i], "apply", "-f", "-") })
	}
	wg.Wait()
	for _, cl := range clusters {
		waitAllReady(t, cl.c, 1, 2*time.Minute)
	}
	everyone := []string{"10.0.0.1:30443", "10.0.0.2:30443", "10.0.0.99:30443", "10.0.1.1:30443"}
	waitBackends(t, emu, everyone...)

	out, status := runPlan(t, "--kubeconfig", clusters[1].c.Kubeconfig, "--oci-loadbalancer-endpoint="+emu.URL(), "--oci-networkloadbalancer-endpoint="+emu.URL())
	for _, want := range []string{"backend set ingress: no change", "ingress 10.0.0.1:30443 weight 1", "ingress 10.0.0.99:30443 weight 1"} {
		if status != 0 || !strings.Contains(out, want) {
			t.Errorf("green's plan (exit %d) does not say %q:\n%s", status, want, out)
		}
	}
	if strings.Contains(out, "ingress 10.0.1.1:30443") || strings.Contains(out, "ingress 10.0.0.2:30443") {
		t.Errorf("green's plan reports its own nodes as unrecorded:\n%s", out)
	}

	// The shared address must stay registered throughout.
	stop, missing := make(chan struct{}), make(chan string, 1)
	go func() {
		defer close(missing)
		for {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			if backends, err := emu.Backends(classicIngress, "ingress"); err == nil &&
				!slices.ContainsFunc(backends, func(b ociemu.Backend) bool { return b.IPAddress == "10.0.0.2" }) {
				missing <- fmt.Sprint(backends)
				return
			}
		}
	}()
	kubectl(t, clusters[0].c, "", "delete", "lbregistrar", "legit", "--wait=false")
	// Blue drains its own; green serves the shared address again before
	// blue's drain period ends.
	waitBackends(t, emu, "10.0.0.1:30443,drain", "10.0.0.2:30443", "10.0.0.99:30443", "10.0.1.1:30443")
	kubectl(t, clusters[0].c, "", "wait", "--for=delete", "lbregistrar/legit", "--timeout=60s")
	waitBackends(t, emu, "10.0.0.2:30443", "10.0.0.99:30443", "10.0.1.1:30443")
	time.Sleep(2 * time.Second) // green's resyncs find nothing to put back
	waitBackends(t, emu, "10.0.0.2:30443", "10.0.0.99:30443", "10.0.1.1:30443")
	waitAllReady(t, clusters[1].c, 1, time.Minute)
	close(stop)
	if backends, ok := <-missing; ok {
		t.Errorf("the shared address was removed while green wants it: %s", backends)
	}
}

// waitBackends waits until the ingress backend set of the classic load
// balancer holds exactly want (ip:port, ",drain" when drained).
func waitBackends(t *testing.T, emu *ociemu.Emulator, want ...string) {
	t.Helper()
	slices.Sort(want)
	eventually.Passes(t, 30*time.Second, 50*time.Millisecond, func() error {
		backends, err := emu.Backends(classicIngress, "ingress")
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
			return fmt.Errorf("ingress holds %v, want %v", got, want)
		}
		return nil
	})
}

func mustRoot(t *testing.T) string {
	t.Helper()
	root, err := kube.FindRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}
