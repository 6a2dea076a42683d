package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peppy-ratio/lbregistrar/test/eventually"
	"github.com/peppy-ratio/lbregistrar/test/kube"
)

// serve run as lbregistrar's service account, with exactly the RBAC config/
// ships, does all of its job: it publishes its CA bundle (built-in
// certificates), admits, registers (cached reads, finalizer and status
// patches), writes its events, and deregisters on deletion, and the API
// server refuses it nothing on the way.
func TestServeUnderTheShippedRBAC(t *testing.T) {
	c, emu := clusterWithWorkload(t, 0)
	ctx := testContext(t)
	kubeconfig, err := c.ServiceAccountKubeconfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	serve := newServeProcess()
	serve.startInstalled(t, c, kubeconfig, nil, "--cert-mode=builtin", "--webhook-host=127.0.0.1", "--secret-namespaces="+kube.Namespace,
		"--oci-loadbalancer-endpoint="+emu.URL(), "--oci-networkloadbalancer-endpoint="+emu.URL())
	serve.waitReady(t)
	if err := c.WaitAdmitting(ctx); err != nil {
		t.Fatal(err)
	}

	kubectl(t, c, apiKeyFor(t, c, emu, classicIngressRegistrar), "apply", "-f", "-")
	eventually.Passes(t, time.Minute, 200*time.Millisecond, func() error {
		if got := backendsOf(t, emu, classicIngress, "ingress"); len(got) != 3 {
			return fmt.Errorf("backends %q", got)
		}
		var events eventsv1.EventList
		if err := c.Client.List(ctx, &events, client.InNamespace("default")); err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.Regarding.Name == "legit" && e.Reason == "BackendSetUpdated" {
				return nil
			}
		}
		return fmt.Errorf("no BackendSetUpdated event in default among %d", len(events.Items))
	})
	kubectl(t, c, "", "delete", "lbregistrar", "legit", "--timeout=60s")
	if got := backendsOf(t, emu, classicIngress, "ingress"); len(got) != 1 {
		t.Errorf("backends after deletion %q, want the one it did not register", got)
	}
	if log := serve.log.String(); strings.Contains(log, "forbidden") {
		t.Errorf("the API server refused serve something:\n%s", log)
	}
}
