package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/test/eventually"
	"github.com/peppy-ratio/lbregistrar/test/kube"
)

// shutdownLatency is longer than controller-runtime's default graceful
// shutdown (30 s), which serve used to keep.
const shutdownLatency = 35 * time.Second

// SIGTERM reaches the leader while OCI runs its work request: the process
// waits for it, records it in status and exits with status 0; the lease is
// released, so the standby leads at once, and its first write (for a node
// added afterwards) is the only other one: nothing was written twice.
func TestShutdownWaitsForTheWriteInFlight(t *testing.T) {
	t.Parallel()
	c, emu := clusterWithWorkload(t, shutdownLatency)
	ctx := testContext(t)
	manifest := apiKeyFor(t, c, emu, classicIngressRegistrar)

	service := newServiceProxy(t)
	pointWebhooksAt(t, c, "https://"+service.Addr(), nil)
	args := []string{"--leader-elect", "--webhook-host=127.0.0.1", "--secret-namespaces=" + kube.Namespace,
		"--oci-loadbalancer-endpoint=" + emu.URL(), "--oci-networkloadbalancer-endpoint=" + emu.URL(), "--oci-core-endpoint=" + emu.URL()}
	leader, standby := newServeProcess(), newServeProcess()
	leader.start(t, c, args...)
	service.AddBackend(leader.WebhookAddr)
	leader.waitReady(t)
	waitLeaseTaken(t, ctx, c)
	standby.start(t, c, args...)
	service.AddBackend(standby.WebhookAddr)
	standby.waitReady(t)

	kubectl(t, c, manifest, "apply", "-f", "-")
	eventually.Passes(t, 2*time.Minute, 100*time.Millisecond, func() error {
		if n := emu.Counters().Writes[classicIngress]; n != 1 {
			return fmt.Errorf("%d writes accepted, waiting for the first", n)
		}
		return nil
	})
	terminated := time.Now()
	if err := leader.Terminate(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-leader.Done():
	case <-time.After(shutdownLatency + time.Minute):
		t.Fatal("the leader did not exit")
	}
	exited := time.Now()
	if err := leader.Err(); err != nil {
		t.Errorf("the leader exited with %v after SIGTERM", err)
	}
	wr := emu.WorkRequests()[0]
	if wr.Status != "SUCCEEDED" || !wr.TimeFinished.Before(exited) {
		t.Fatalf("the leader exited before its work request finished: %+v", wr)
	}
	t.Logf("the leader exited %s after SIGTERM, its work request having taken %s",
		exited.Sub(terminated).Round(time.Second), wr.TimeFinished.Sub(wr.TimeAccepted).Round(time.Second))

	var obj v1beta1.LBRegistrar
	if err := c.Client.Get(ctx, client.ObjectKey{Name: "legit"}, &obj); err != nil {
		t.Fatal(err)
	}
	if bs := obj.Status.BackendSets; len(bs) != 1 || bs[0].LastWorkRequest == nil ||
		bs[0].LastWorkRequest.ID != wr.ID || bs[0].LastWorkRequest.Status != "SUCCEEDED" || bs[0].OwnedCount() != 2 {
		t.Fatalf("the leader did not record its write: %+v", obj.Status.BackendSets)
	}

	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-c"}}
	if err := c.Client.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.3"}}
	if err := c.Client.Status().Update(ctx, node); err != nil {
		t.Fatal(err)
	}
	eventually.Passes(t, 2*time.Minute, 100*time.Millisecond, func() error {
		if backends := backendsOf(t, emu, classicIngress, "ingress"); !slices.Contains(backends, "10.0.0.3:30443") {
			return fmt.Errorf("node-c not registered by the new leader: %v", backends)
		}
		return nil
	})
	if n := emu.Counters().Writes[classicIngress]; n != 2 {
		t.Errorf("%d writes, want 2: the leader's and the new leader's for node-c", n)
	}
}

// waitLeaseTaken waits until some serve --leader-elect has the lease.
func waitLeaseTaken(t *testing.T, ctx context.Context, c *kube.Cluster) {
	t.Helper()
	eventually.Passes(t, 2*time.Minute, 100*time.Millisecond, func() error {
		out, stderr, err := c.Kubectl(ctx, "", "-n", kube.Namespace, "get", "lease", "lbregistrar.nodes.peppy-ratio.dev", "-o", "jsonpath={.spec.holderIdentity}")
		if err != nil || out == "" {
			return fmt.Errorf("no leader has the lease: %w %s", err, stderr)
		}
		return nil
	})
}
