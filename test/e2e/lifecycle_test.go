package e2e

import (
	"strings"
	"testing"

	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Deleting the CRD, as an uninstall does (kubectl delete -k config/default,
// helm uninstall with crd.keep=false, or the original operator's install
// manifest, which contains the same CRD), deletes every LBRegistrar; serve,
// under the shipped RBAC, lets each go without a single write to OCI, and
// says so.
func TestDeletingTheCRDDeregistersNothing(t *testing.T) {
	c, emu := clusterWithWorkload(t, 0)
	ctx := testContext(t)
	serve := serveUnderTheShippedRBAC(t, c, emu)
	registerLegit(t, c, emu)
	emu.ResetCalls()

	kubectl(t, c, "", "delete", "crd", "lbregistrars.nodes.peppy-ratio.dev", "--timeout=60s")
	if got := backendsOf(t, emu, classicIngress, "ingress"); len(got) != 3 {
		t.Errorf("backends after the CRD was deleted %q, want all 3 still registered", got)
	}
	if writes := emu.Counters().Writes; len(writes) != 0 {
		t.Errorf("deleting the CRD wrote to OCI: %v", writes)
	}
	var events eventsv1.EventList
	if err := c.Client.List(ctx, &events, client.InNamespace("default")); err != nil {
		t.Fatal(err)
	}
	said := false
	for _, e := range events.Items {
		said = said || e.Regarding.Name == "legit" && e.Reason == "BackendsKept" && strings.Contains(e.Note, "CRD is being deleted")
	}
	if !said {
		t.Errorf("no BackendsKept event names the CRD's deletion among %d events", len(events.Items))
	}
	if log := serve.log.String(); strings.Contains(log, "forbidden") {
		t.Errorf("the API server refused serve something:\n%s", log)
	}
}
