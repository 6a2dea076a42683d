package e2e

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/test/eventually"
	"github.com/peppy-ratio/lbregistrar/test/kube"
)

// The likeliest mistakes of a first install with workload identity, made
// on purpose against serve under the shipped RBAC: the region missing from
// the controller's environment, a ServiceAccount that does not exist, one
// the Role lbregistrar-workload-identity does not list, and one no IAM
// policy names (OCI answers it 404 NotAuthorizedOrNotFound for the load
// balancer that exists). Each ends Stalled, with a reason and a message
// that name the fix, and LBRegistrarIdentityUnusable fires on the series
// serve exposes (Prometheus' query engine over the scrape, kept steady for
// the alerts' "for"). Beside them, a backend set that does not exist fires
// LBRegistrarStalled, and a Service that does not exist LBRegistrarDegraded
// and, its backend set held, LBRegistrarNotReady. Fixing the region clears
// its resource: Stalled is not "never retried".
func TestIdentityMistakesStallAndAlert(t *testing.T) {
	t.Parallel()
	c, emu := clusterWithWorkload(t, 0)
	ctx := testContext(t)
	if err := c.AllowWorkloadIdentity(ctx, "lb-writer", "ghost", "no-policy"); err != nil {
		t.Fatal(err)
	}
	kubectl(t, c, `apiVersion: v1
kind: ServiceAccount
metadata: {name: lb-writer, namespace: `+kube.Namespace+`}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: unlisted, namespace: `+kube.Namespace+`}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: no-policy, namespace: `+kube.Namespace+`}
`, "apply", "-f", "-")
	emu.RevokePolicies("system:serviceaccount:" + kube.Namespace + ":no-policy")
	registrar := func(name, serviceAccount, target string) string {
		return `apiVersion: nodes.peppy-ratio.dev/v1beta1
kind: LBRegistrar
metadata: {name: ` + name + `}
spec:
  loadBalancerId: ` + classicIngress + `
  services:
  - ` + target + `
  workloadIdentity:
    region: ap-tokyo-1
    serviceAccount: {namespace: ` + kube.Namespace + `, name: ` + serviceAccount + `}
---
`
	}
	env, args := workloadIdentityAt(t, c, emu)

	withoutRegion := newServeProcess()
	for _, e := range env {
		if !strings.HasPrefix(e, "OCI_RESOURCE_PRINCIPAL_REGION=") {
			withoutRegion.Env = append(withoutRegion.Env, e)
		}
	}
	withoutRegion.startUnderTheShippedRBAC(t, c, emu, args...)
	kubectl(t, c, registrar("no-region", "lb-writer", "{nodePort: 30443, backendSetName: ingress, weight: 1}"), "apply", "-f", "-")
	waitStalled(t, c, "no-region", v1beta1.ReasonRegionNotSet, "Helm value workloadIdentityRegion")
	expectAlerts(t, withoutRegion.scrape(t), `{alertname="LBRegistrarIdentityUnusable", lbregistrar="no-region", reason="RegionNotSet", severity="critical"}`)
	withoutRegion.Stop()

	serve := newServeProcess()
	serve.Env = env
	serve.startUnderTheShippedRBAC(t, c, emu, args...)
	kubectl(t, c, registrar("ghost", "ghost", "{nodePort: 30080, backendSetName: ingress-http, weight: 1}")+
		registrar("unlisted", "unlisted", "{nodePort: 30443, backendSetName: edge, weight: 1}")+
		registrar("no-policy", "no-policy", "{nodePort: 30080, backendSetName: edge-http, weight: 1}")+
		registrar("no-set", "lb-writer", "{nodePort: 30081, backendSetName: absent, weight: 1}")+
		registrar("no-service", "lb-writer", "{name: absent, namespace: "+kube.Namespace+", port: 80, backendSetName: web-pods, weight: 1}"),
		"apply", "-f", "-")
	waitStalled(t, c, "ghost", v1beta1.ReasonServiceAccountNotFound, "ServiceAccount "+kube.Namespace+"/ghost not found: create it")
	waitStalled(t, c, "unlisted", v1beta1.ReasonServiceAccountNotListed, "list it in the Role lbregistrar-workload-identity of namespace "+kube.Namespace)
	waitStalled(t, c, "no-policy", v1beta1.ReasonNotAuthorizedOrNotFound, "an IAM policy lets the identity use load-balancers")
	waitStalled(t, c, "no-set", v1beta1.ReasonBackendSetNotFound, `backend set "absent" not found`)
	waitCondition(t, c, "no-region", v1beta1.ConditionReady, metav1.ConditionTrue, v1beta1.ReasonRegistered)
	waitCondition(t, c, "no-service", v1beta1.ConditionDegraded, metav1.ConditionTrue, v1beta1.ReasonServiceNotFound)
	waitCondition(t, c, "no-service", v1beta1.ConditionReady, metav1.ConditionFalse, v1beta1.ReasonHeld)

	expectAlerts(t, serve.scrape(t),
		`{alertname="LBRegistrarIdentityUnusable", lbregistrar="ghost", reason="ServiceAccountNotFound", severity="critical"}`,
		`{alertname="LBRegistrarIdentityUnusable", lbregistrar="unlisted", reason="ServiceAccountNotListed", severity="critical"}`,
		`{alertname="LBRegistrarIdentityUnusable", lbregistrar="no-policy", reason="NotAuthorizedOrNotFound", severity="critical"}`,
		`{alertname="LBRegistrarStalled", lbregistrar="no-set", reason="BackendSetNotFound", severity="warning"}`,
		`{alertname="LBRegistrarDegraded", lbregistrar="no-service", reason="ServiceNotFound", severity="warning"}`,
		`{alertname="LBRegistrarNotReady", lbregistrar="no-service", reason="Held", severity="warning"}`,
	)
}

// waitStalled waits until the LBRegistrar name is Stalled with reason, as
// its Ready is, and Ready's message says fix.
func waitStalled(t *testing.T, c *kube.Cluster, name, reason, fix string) {
	t.Helper()
	waitCondition(t, c, name, v1beta1.ConditionStalled, metav1.ConditionTrue, reason)
	waitCondition(t, c, name, v1beta1.ConditionReady, metav1.ConditionFalse, reason, fix)
}

// waitCondition waits until the LBRegistrar name has the condition typ at
// status with reason, its message saying each of says.
func waitCondition(t *testing.T, c *kube.Cluster, name, typ string, status metav1.ConditionStatus, reason string, says ...string) {
	t.Helper()
	eventually.Passes(t, time.Minute, 250*time.Millisecond, func() error {
		var obj v1beta1.LBRegistrar
		if err := c.Client.Get(testContext(t), client.ObjectKey{Name: name}, &obj); err != nil {
			return err
		}
		cond := meta.FindStatusCondition(obj.Status.Conditions, typ)
		if cond == nil || cond.Status != status || cond.Reason != reason {
			return fmt.Errorf("%s's %s: %+v, want %s with reason %s", name, typ, cond, status, reason)
		}
		for _, s := range says {
			if !strings.Contains(cond.Message, s) {
				return fmt.Errorf("%s's %s says %q, not %q", name, typ, cond.Message, s)
			}
		}
		return nil
	})
}

// expectAlerts fails unless each alert of want fires, as `manifests
// fire-alerts` prints it, if the scrape stays as it is.
func expectAlerts(t *testing.T, scrape string, want ...string) {
	t.Helper()
	firing := runManifests(t, scrape, "fire-alerts")
	for _, w := range want {
		if !strings.Contains(firing, w+"\n") {
			t.Errorf("alert %s does not fire; firing:\n%s", w, firing)
		}
	}
}

// scrape is the text of serve's /metrics, served over plain HTTP.
func (p serveProcess) scrape(t *testing.T) string {
	t.Helper()
	resp, err := http.Get("http://" + p.MetricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}
