package e2e

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/peppy-ratio/lbregistrar/test/eventually"
	"github.com/peppy-ratio/lbregistrar/test/kube"
	"github.com/peppy-ratio/lbregistrar/test/ociemu"
)

// serve run as lbregistrar's service account, with exactly the RBAC config/
// ships, does all of its job: it publishes its CA bundle (built-in
// certificates), admits, registers (cached reads, finalizer and status
// patches), writes its events, and deregisters on deletion, and the API
// server refuses it nothing on the way. Admission knows it runs as that
// ServiceAccount: a resource naming it signs in as the controller, which
// serve does not allow, whoever writes (the cluster's admin here, who may
// create tokens for any ServiceAccount).
func TestServeUnderTheShippedRBAC(t *testing.T) {
	c, emu := clusterWithWorkload(t, 0)
	ctx := testContext(t)
	serve := serveUnderTheShippedRBAC(t, c, emu)

	_, stderr, err := c.Kubectl(ctx, `{"apiVersion": "nodes.peppy-ratio.dev/v1beta1", "kind": "LBRegistrar", "metadata": {"name": "naming-the-controller"},
 "spec": {"loadBalancerId": "`+classicIngress+`", "services": [{"nodePort": 30080, "backendSetName": "edge-http", "weight": 1}],
  "workloadIdentity": {"region": "ap-tokyo-1", "serviceAccount": {"namespace": "`+kube.Namespace+`", "name": "lbregistrar"}}}}`, "apply", "-f", "-")
	if want := "spec.workloadIdentity.serviceAccount: Forbidden: lbregistrar serve does not let resources sign in as the controller itself"; err == nil || !strings.Contains(stderr, want) {
		t.Errorf("naming the controller's ServiceAccount: want %q; err=%v stderr:\n%s", want, err, stderr)
	}

	registerLegit(t, c, emu)
	eventually.Passes(t, time.Minute, 200*time.Millisecond, func() error {
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

// registerLegit applies classicIngressRegistrar through the API server and
// waits until its backend set has the 3 backends it registers there.
func registerLegit(t *testing.T, c *kube.Cluster, emu *ociemu.Emulator) {
	t.Helper()
	kubectl(t, c, apiKeyFor(t, c, emu, classicIngressRegistrar), "apply", "-f", "-")
	eventually.Passes(t, time.Minute, 200*time.Millisecond, func() error {
		if got := backendsOf(t, emu, classicIngress, "ingress"); len(got) != 3 {
			return fmt.Errorf("backends %q", got)
		}
		return nil
	})
}

// serveUnderTheShippedRBAC starts serve for c as lbregistrar's service
// account, with exactly the RBAC config/ ships, built-in certificates and
// API keys from lbregistrar-system, and returns once the API server admits
// through it.
func serveUnderTheShippedRBAC(t *testing.T, c *kube.Cluster, emu *ociemu.Emulator) serveProcess {
	t.Helper()
	serve := newServeProcess()
	serve.startUnderTheShippedRBAC(t, c, emu)
	return serve
}

// startUnderTheShippedRBAC is serveUnderTheShippedRBAC with a process the
// caller set up, and args besides.
func (p serveProcess) startUnderTheShippedRBAC(t *testing.T, c *kube.Cluster, emu *ociemu.Emulator, args ...string) {
	t.Helper()
	ctx := testContext(t)
	kubeconfig, err := c.ServiceAccountKubeconfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p.startInstalled(t, c, kubeconfig, nil, append([]string{"--cert-mode=builtin", "--webhook-host=127.0.0.1", "--secret-namespaces=" + kube.Namespace,
		"--oci-loadbalancer-endpoint=" + emu.URL(), "--oci-networkloadbalancer-endpoint=" + emu.URL(), "--oci-core-endpoint=" + emu.URL()}, args...)...)
	p.waitReady(t)
	if err := c.WaitAdmitting(ctx); err != nil {
		t.Fatal(err)
	}
}

// serve run as lbregistrar's service account, with exactly the RBAC config/
// ships and the opt-in config/workload-identity listing lb-writer, signs a
// resource in as the ServiceAccount it names, and, allowed to, another as
// itself and a third as the instance it runs on: it requests
// the ServiceAccount's token, OKE workload identity (the emulator, which
// believes the API server's TokenReview) exchanges it for a session, and
// the session signs the writes; the instance's certificate comes from the
// metadata service and is exchanged at the auth service (both the
// emulator's, on loopback, where the SDK's environment variables point).
func TestServeSignsInWithoutAKeyUnderTheShippedRBAC(t *testing.T) {
	keyless := startKeyless(t)
	emu := keyless.emu
	signers := map[string]string{ // by backend set
		"ingress":   "system:serviceaccount:" + kube.Namespace + ":lb-writer",
		"edge-http": "system:serviceaccount:" + kube.Namespace + ":lbregistrar", // the controller's own
		"edge":      keyless.instance,
	}
	for _, call := range emu.Calls() {
		set := call.Path[strings.LastIndex(call.Path, "/")+1:]
		if call.Operation == "UpdateBackendSet" && call.Status < 300 && call.Principal != signers[set] {
			t.Errorf("a write to %s signed by %q, want %q", set, call.Principal, signers[set])
		}
	}
	if log := keyless.serve.log.String(); strings.Contains(log, "forbidden") {
		t.Errorf("the API server refused serve something:\n%s", log)
	}
}

// lbregistrar plan --keyless, run as config/plan-job runs it (as
// lbregistrar's ServiceAccount under the shipped RBAC, with the Job's
// arguments and environment), plans the resources that sign in without an
// API key as serve signs them in: nothing to write once serve registered
// them, exit 0; a write to each of their backend sets once a node joins,
// exit 2. Without --keyless they cannot be planned, exit 1.
func TestKeylessPlanRunsAsTheController(t *testing.T) {
	keyless := startKeyless(t)
	c, emu := keyless.c, keyless.emu
	var job batchv1.Job
	if err := yaml.UnmarshalStrict([]byte(readRootFile(t, "config/plan-job/job.yaml")), &job); err != nil {
		t.Fatal(err)
	}
	kubectl(t, c, readRootFile(t, "config/plan-job/job.yaml"), "apply", "-f", "-")
	container := job.Spec.Template.Spec.Containers[0]
	if job.Namespace != kube.Namespace || job.Spec.Template.Spec.ServiceAccountName != "lbregistrar" || container.Args[0] != "plan" {
		t.Fatalf("config/plan-job runs %q as %s/%s, want plan as lbregistrar-system/lbregistrar", container.Args, job.Namespace, job.Spec.Template.Spec.ServiceAccountName)
	}
	env := append([]string{"POD_NAMESPACE=" + job.Namespace}, keyless.env...)
	kubeconfig, err := c.ServiceAccountKubeconfig(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	plan := func(args ...string) (string, int) {
		return runPlanIn(t, env, append(append([]string{"--kubeconfig", kubeconfig, "-o", "json",
			"--oci-loadbalancer-endpoint=" + emu.URL(), "--oci-networkloadbalancer-endpoint=" + emu.URL(), "--oci-core-endpoint=" + emu.URL()},
			keyless.args...), args...)...)
	}

	if out, status := plan(container.Args[1:]...); status != 0 || len(pendingIn(t, out)) != 0 {
		t.Fatalf("plan as the Job runs it, once serve registered: exit %d, writes %+v; want 0 and none", status, pendingIn(t, out))
	}
	keyless.serve.Stop()
	addNode(t, c, "node-z", "10.0.0.9")
	out, status := plan(container.Args[1:]...)
	written := map[string]bool{}
	for _, w := range pendingIn(t, out) {
		written[w.BackendSet] = true
	}
	if status != 2 || !written["ingress"] || !written["edge-http"] || !written["edge"] {
		t.Errorf("plan after a node joined: exit %d, backend sets written %v; want 2 and ingress, edge-http and edge", status, written)
	}
	if out, status := plan("--detailed-exitcode"); status != 1 || !strings.Contains(out, "only the controller, in the cluster, signs in this way") {
		t.Errorf("plan without --keyless: exit %d, want 1 and the resources refused:\n%s", status, out)
	}
}

// keylessSetup is serve run as lbregistrar's service account, with exactly
// the RBAC config/ ships and the opt-in config/workload-identity listing
// lb-writer, and three resources it registered: keyless, signing in as
// lb-writer (backend set ingress), as-the-controller (edge-http) and
// as-the-instance (edge). env and args are what point serve at the
// emulator's workload identity and instance metadata.
type keylessSetup struct {
	c         *kube.Cluster
	emu       *ociemu.Emulator
	serve     serveProcess
	instance  string
	env, args []string
}

func startKeyless(t *testing.T) keylessSetup {
	t.Helper()
	c, emu := clusterWithWorkload(t, 0)
	ctx := testContext(t)
	if err := c.AllowWorkloadIdentity(ctx, "lb-writer"); err != nil {
		t.Fatal(err)
	}
	const instance = "ocid1.instance.oc1.ap-tokyo-1.node"
	instanceEnv, err := emu.ServeInstancePrincipal(instance)
	if err != nil {
		t.Fatal(err)
	}
	serve := newServeProcess()
	workloadEnv, workloadArgs := workloadIdentityAt(t, c, emu)
	env, args := append(workloadEnv, instanceEnv...), append(workloadArgs, "--allow-controller-identity")
	serve.Env = env
	serve.startUnderTheShippedRBAC(t, c, emu, args...)

	kubectl(t, c, `apiVersion: v1
kind: ServiceAccount
metadata: {name: lb-writer, namespace: `+kube.Namespace+`}
---
apiVersion: nodes.peppy-ratio.dev/v1beta1
kind: LBRegistrar
metadata: {name: keyless}
spec:
  loadBalancerId: `+classicIngress+`
  services:
  - {nodePort: 30443, backendSetName: ingress, weight: 1}
  workloadIdentity:
    region: ap-tokyo-1
    serviceAccount: {namespace: `+kube.Namespace+`, name: lb-writer}
---
apiVersion: nodes.peppy-ratio.dev/v1beta1
kind: LBRegistrar
metadata: {name: as-the-controller}
spec:
  loadBalancerId: `+classicIngress+`
  services:
  - {nodePort: 30080, backendSetName: edge-http, weight: 1}
  workloadIdentity: {region: ap-tokyo-1}
---
apiVersion: nodes.peppy-ratio.dev/v1beta1
kind: LBRegistrar
metadata: {name: as-the-instance}
spec:
  loadBalancerId: `+classicIngress+`
  services:
  - {nodePort: 30443, backendSetName: edge, weight: 1}
  instancePrincipal: {region: ap-tokyo-1}
`, "apply", "-f", "-")
	eventually.Passes(t, time.Minute, 200*time.Millisecond, func() error {
		if got := backendsOf(t, emu, classicIngress, "ingress"); len(got) != 3 {
			return fmt.Errorf("backends %q", got)
		}
		if got := backendsOf(t, emu, classicIngress, "edge-http"); len(got) == 0 {
			return errors.New("nothing registered as the controller")
		}
		if got := backendsOf(t, emu, classicIngress, "edge"); len(got) == 0 {
			return errors.New("nothing registered as the instance")
		}
		return nil
	})
	return keylessSetup{c: c, emu: emu, serve: serve, instance: instance, env: env, args: args}
}

// The editor and viewer roles grant what they say, and carry the labels
// that aggregate them into admin and edit, and view (the aggregation itself
// is kube-controller-manager's, which this API server runs without).
func TestAggregatedRolesGrantWhatTheySay(t *testing.T) {
	c := kube.Start(t, kube.Options{Bare: true})
	kubectl(t, c, readRootFile(t, "config/crd/bases/nodes.peppy-ratio.dev_lbregistrars.yaml"), "apply", "-f", "-")
	kubectl(t, c, readRootFile(t, "config/rbac/aggregate_roles.yaml"), "apply", "-f", "-")
	kubectl(t, c, "", "create", "clusterrolebinding", "ann-edits", "--clusterrole=lbregistrar-editor", "--user=ann")
	kubectl(t, c, "", "create", "clusterrolebinding", "vic-views", "--clusterrole=lbregistrar-viewer", "--user=vic")
	for _, tc := range []struct {
		user, verb, subresource, want string
	}{
		{"ann", "create", "", "yes"}, {"ann", "delete", "", "yes"}, {"ann", "update", "status", "no"},
		{"vic", "list", "", "yes"}, {"vic", "get", "status", "yes"}, {"vic", "create", "", "no"},
	} {
		stdout, stderr, _ := c.Kubectl(testContext(t), "", "auth", "can-i", tc.verb, "lbregistrars.nodes.peppy-ratio.dev", "--subresource="+tc.subresource, "--as", tc.user)
		if got := strings.TrimSpace(stdout); got != tc.want {
			t.Errorf("%s may %s lbregistrars %s: %q, want %q %s", tc.user, tc.verb, tc.subresource, got, tc.want, stderr)
		}
	}
	for role, labels := range map[string][]string{
		"lbregistrar-editor": {"rbac.authorization.k8s.io/aggregate-to-admin", "rbac.authorization.k8s.io/aggregate-to-edit"},
		"lbregistrar-viewer": {"rbac.authorization.k8s.io/aggregate-to-view"},
	} {
		var cr rbacv1.ClusterRole
		if err := c.Client.Get(testContext(t), client.ObjectKey{Name: role}, &cr); err != nil {
			t.Fatal(err)
		}
		for _, l := range labels {
			if cr.Labels[l] != "true" {
				t.Errorf("%s is not labelled %s", role, l)
			}
		}
	}
}

// workloadIdentityAt serves OKE workload identity from emu, believing the
// service account tokens c's API server issues, and returns the
// environment and the flags that point serve at it.
func workloadIdentityAt(t *testing.T, c *kube.Cluster, emu *ociemu.Emulator) (env, args []string) {
	t.Helper()
	host, err := emu.ServeWorkloadIdentity(kube.TokenReviewer(c.Client))
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(caFile, emu.CACertPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	return []string{"OCI_RESOURCE_PRINCIPAL_REGION=ap-tokyo-1", "OCI_KUBERNETES_SERVICE_ACCOUNT_CERT_PATH=" + caFile},
		[]string{"--workload-identity-host=" + host, "--workload-identity-ca-file=" + caFile}
}
