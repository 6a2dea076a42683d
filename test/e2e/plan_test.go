package e2e

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/reconciler"
	"github.com/peppy-ratio/lbregistrar/reconciler/debugview"
	"github.com/peppy-ratio/lbregistrar/reconciler/preview"
	"github.com/peppy-ratio/lbregistrar/test/eventually"
	"github.com/peppy-ratio/lbregistrar/test/kube"
	"github.com/peppy-ratio/lbregistrar/test/ociemu"
)

// What old-operator-objects.yaml asks for once node-c (10.0.0.3) joins,
// beyond what old-operator-backends.yaml lists: a backend in each backend
// set that registers every node, at the weight the others have there.
var nodeCJoined = []preview.BackendSetChange{
	{LBRegistrar: "old-multi-service", LoadBalancerID: "ocid1.loadbalancer.oc1.ap-tokyo-1.aaaaaaaaold4", BackendSet: "ingress", Mode: "apply",
		Added: []preview.BackendWeight{{Backend: "10.0.0.3:30443", Weight: 1}},
		Kept:  []preview.KeptBackend{{Backend: "10.0.0.1:30443", Weight: 1}, {Backend: "10.0.0.2:30443", Weight: 1}}},
	{LBRegistrar: "old-port-alias", LoadBalancerID: "ocid1.loadbalancer.oc1.ap-tokyo-1.aaaaaaaaold3", BackendSet: "alias", Mode: "apply",
		Added: []preview.BackendWeight{{Backend: "10.0.0.3:31000", Weight: 1}},
		Kept:  []preview.KeptBackend{{Backend: "10.0.0.1:31000", Weight: 1}, {Backend: "10.0.0.2:31000", Weight: 1}}},
	{LBRegistrar: "old-node-port", LoadBalancerID: "ocid1.networkloadbalancer.oc1.ap-tokyo-1.aaaaaaaaold2", BackendSet: "fixed", Mode: "apply",
		Added: []preview.BackendWeight{{Backend: "10.0.0.3:30443", Weight: 5}},
		Kept:  []preview.KeptBackend{{Backend: "10.0.0.1:30443", Weight: 5}, {Backend: "10.0.0.2:30443", Weight: 5}}},
}

// lbregistrar plan before the switch: only the original operator's CRD is
// installed, its v1alpha1 objects stored, and the load balancers as it left
// them (those TestInstallOverTheOriginalOperator takes over without a
// write). Run as a user who may only read, and not Secrets, with the API key
// of an OCI config file, plan finds nothing to write and exits 0 with
// --detailed-exitcode; once a node joins it prints exactly the backends it
// would add and exits 2. OCI sees reads only.
func TestPlanBeforeTheSwitch(t *testing.T) {
	t.Parallel()
	c := kube.Start(t, kube.Options{Bare: true})
	emu := leftByTheOriginalOperator(t, c)
	reader := readOnlyKubeconfig(t, c)
	plan := func(args ...string) (string, int) {
		return runPlan(t, append([]string{"--kubeconfig", reader, "--oci-config", ociConfigFile(t, emu),
			"--oci-loadbalancer-endpoint=" + emu.URL(), "--oci-networkloadbalancer-endpoint=" + emu.URL(), "--oci-core-endpoint=" + emu.URL()}, args...)...)
	}
	emu.ResetCalls()

	out, status := plan("--detailed-exitcode")
	if status != 0 || !strings.HasSuffix(out, "No changes: 5 backend set(s) already have what lbregistrar would register.\n") {
		t.Errorf("plan of the load balancers as the original operator left them: exit %d, want 0 and no changes:\n%s", status, out)
	}

	addNode(t, c, "node-c", "10.0.0.3")
	out, status = plan("--detailed-exitcode", "old-multi-service")
	want := `load balancer ocid1.loadbalancer.oc1.ap-tokyo-1.aaaaaaaaold4
  LBRegistrar old-multi-service
    backend set ingress: 1 to add, 0 to remove, 0 to re-weight
      + 10.0.0.3:30443 weight 1
        10.0.0.1:30443 weight 1
        10.0.0.2:30443 weight 1
    backend set ingress-http: no change
        10.0.0.1:30080 weight 3
    Ready=True Registered: every backend set has the backends this resource should own
Plan: 1 backend set(s) to write, 1 unchanged.
`
	if diff := gocmp.Diff(want, out); status != 2 || diff != "" {
		t.Errorf("plan after node-c joined: exit %d, want 2; output (-want +got):\n%s", status, diff)
	}
	out, _ = plan("-o", "json")
	if diff := gocmp.Diff(sortedChanges(nodeCJoined), pendingIn(t, out)); diff != "" {
		t.Errorf("plan -o json after node-c joined (-want +got):\n%s", diff)
	}

	for _, call := range emu.Calls() {
		if call.Method != http.MethodGet {
			t.Errorf("plan called OCI's %s (%s %s)", call.Operation, call.Method, call.Path)
		}
	}
}

// lbregistrar plan reads API keys where serve does: in --secret-namespaces,
// by default --namespace, where serve runs. A resource whose Secret is
// elsewhere (as the original operator allowed) is planned as serve would
// find it, SecretNamespaceNotAllowed, and plan exits 1, so migration's
// first step names it; given that namespace too, plan reads the key and
// finds nothing to write.
func TestPlanReadsKeysWhereServeDoes(t *testing.T) {
	t.Parallel()
	c := kube.Start(t, kube.Options{Bare: true})
	emu := leftByTheOriginalOperator(t, c)
	ctx := testContext(t)
	var key corev1.Secret
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: kube.Namespace, Name: "oci-api-key"}, &key); err != nil {
		t.Fatal(err)
	}
	kubectl(t, c, "", "create", "namespace", "team-keys")
	if err := c.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-keys", Name: key.Name}, Data: key.Data}); err != nil {
		t.Fatal(err)
	}
	kubectl(t, c, "", "patch", "lbregistrars.v1alpha1.nodes.peppy-ratio.dev", "old-node-port", "--type=json",
		"-p", `[{"op": "replace", "path": "/spec/apiKey/privateKey/namespace", "value": "team-keys"}]`)
	plan := func(args ...string) (string, int) {
		return runPlan(t, append([]string{"--kubeconfig", c.Kubeconfig, "--detailed-exitcode",
			"--oci-loadbalancer-endpoint=" + emu.URL(), "--oci-networkloadbalancer-endpoint=" + emu.URL(), "--oci-core-endpoint=" + emu.URL()}, args...)...)
	}

	for _, args := range [][]string{nil, {"--secret-namespaces=" + kube.Namespace}} {
		out, status := plan(append(args, "-o", "json")...)
		var report struct {
			LBRegistrars []reconciler.ResourcePlan `json:"lbregistrars"`
		}
		if err := json.Unmarshal([]byte(out), &report); err != nil {
			t.Fatalf("plan -o json: %v\n%s", err, out)
		}
		refused := map[string]string{}
		for _, rp := range report.LBRegistrars {
			if rp.Error != "" {
				refused[rp.LBRegistrar] = rp.Error
			}
		}
		if status != 1 || len(refused) != 1 || !strings.Contains(refused["old-node-port"], "Secret team-keys/oci-api-key is outside the namespaces API keys are read from") {
			t.Errorf("plan %v: exit %d, resources that cannot sign in %q; want 1 and old-node-port alone, its Secret outside the namespaces", args, status, refused)
		}
	}
	if out, status := plan("--secret-namespaces=" + kube.Namespace + ",team-keys"); status != 0 || strings.Contains(out, "outside the namespaces") {
		t.Errorf("plan with team-keys allowed: exit %d, want 0 and nothing to write:\n%s", status, out)
	}
}

// serve --dry-run beside the original operator: lbregistrar's CRD and
// webhooks installed over the original's objects, a node joined that the
// original operator has not registered yet. The controller plans the writes
// lbregistrar plan shows, reports each in /debug/lanes, as an Event, in
// lbregistrar_pending_writes and as Ready=False reason DryRun, and makes
// none: OCI sees reads only.
func TestShadowModeDoesNotWriteWhatPlanShows(t *testing.T) {
	t.Parallel()
	c := kube.Start(t, kube.Options{Bare: true})
	ctx := testContext(t)
	emu := leftByTheOriginalOperator(t, c)
	addNode(t, c, "node-c", "10.0.0.3")
	emu.ResetCalls()

	endpoints := []string{"--oci-loadbalancer-endpoint=" + emu.URL(), "--oci-networkloadbalancer-endpoint=" + emu.URL(), "--oci-core-endpoint=" + emu.URL()}
	serve := newServeProcess()
	serve.startInstalled(t, c, c.Kubeconfig, nil, append(endpoints, "--dry-run", "--webhook-host=127.0.0.1", "--secret-namespaces="+kube.Namespace)...)
	serve.waitReady(t)
	pendingOn := map[string]bool{}
	for _, w := range nodeCJoined {
		pendingOn[w.LBRegistrar] = true
	}
	eventually.Passes(t, time.Minute, 250*time.Millisecond, func() error {
		var list v1beta1.LBRegistrarList
		if err := c.Client.List(ctx, &list); err != nil {
			return err
		}
		for _, r := range list.Items {
			want := v1beta1.ReasonRegistered
			if pendingOn[r.Name] {
				want = v1beta1.ReasonDryRun
			}
			if ready := meta.FindStatusCondition(r.Status.Conditions, v1beta1.ConditionReady); ready == nil || ready.Reason != want || ready.ObservedGeneration != r.Generation {
				return fmt.Errorf("%s: Ready %+v, want reason %s", r.Name, ready, want)
			}
		}
		return nil
	})

	var lanes debugview.View
	getJSON(t, "http://"+serve.MetricsAddr+"/debug/lanes", &lanes)
	if diff := gocmp.Diff(sortedChanges(nodeCJoined), lanes.PendingWrites); !lanes.DryRun || diff != "" {
		t.Errorf("/debug/lanes: dryRun %v, pending writes (-want +got):\n%s", lanes.DryRun, diff)
	}
	out, exit := runPlan(t, append(endpoints, "--kubeconfig", c.Kubeconfig, "-o", "json")...)
	if diff := gocmp.Diff(lanes.PendingWrites, pendingIn(t, out)); exit != 0 || diff != "" {
		t.Errorf("lbregistrar plan beside serve --dry-run: exit %d; pending writes (-serve +plan):\n%s", exit, diff)
	}
	serve.assertMetrics(t, `lbregistrar_pending_writes{backend_set="fixed",load_balancer="ocid1.networkloadbalancer.oc1.ap-tokyo-1.aaaaaaaaold2"} 1`,
		`lbregistrar_pending_writes{backend_set="ingress-http",load_balancer="ocid1.loadbalancer.oc1.ap-tokyo-1.aaaaaaaaold4"} 0`)
	// Events are sent on their own, after the reconcile that records them.
	eventually.Passes(t, 30*time.Second, 250*time.Millisecond, func() error {
		var events eventsv1.EventList
		if err := c.Client.List(ctx, &events); err != nil {
			return err
		}
		withEvent := map[string]bool{}
		for _, e := range events.Items {
			if e.Reason == v1beta1.ReasonDryRun {
				withEvent[e.Regarding.Name] = true
			}
		}
		if diff := gocmp.Diff(pendingOn, withEvent); diff != "" {
			return fmt.Errorf("resources with a DryRun Event (-want +got):\n%s", diff)
		}
		return nil
	})
	for _, call := range emu.Calls() {
		if call.Method != http.MethodGet {
			t.Errorf("serve --dry-run called OCI's %s (%s %s)", call.Operation, call.Method, call.Path)
		}
	}
}

// leftByTheOriginalOperator makes c and an emulator what the original
// operator leaves behind: its CRD and old-operator-objects.yaml stored,
// their API key's Secret, the workload, and the load balancers as it
// registered them (old-operator-backends.yaml), which the emulator has.
func leftByTheOriginalOperator(t *testing.T, c *kube.Cluster) *ociemu.Emulator {
	t.Helper()
	emu := seededEmulator(t, c.Root+"/test/testdata/old-operator-backends.yaml", 0)
	kubectl(t, c, "", "create", "namespace", kube.Namespace)
	objects := apiKeyFor(t, c, emu, testdata(t, "old-operator-objects.yaml"))
	createWorkload(t, c)
	installOldOperatorCRD(t, c)
	kubectl(t, c, objects, "apply", "-f", "-")
	return emu
}

// readOnlyKubeconfig is a kubeconfig of a user who may get and list what
// lbregistrar plan reads, Secrets excepted, and write nothing.
func readOnlyKubeconfig(t *testing.T, c *kube.Cluster) string {
	t.Helper()
	read := []string{"get", "list"}
	return kubeconfigWithRules(t, c, "plan-reader", []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"nodes", "services"}, Verbs: read},
		{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: read},
		{APIGroups: []string{v1beta1.GroupVersion.Group}, Resources: []string{"lbregistrars"}, Verbs: read},
	})
}

// kubeconfigWithRules is a kubeconfig of user, bound to a ClusterRole of
// rules and nothing more.
func kubeconfigWithRules(t *testing.T, c *kube.Cluster, user string, rules []rbacv1.PolicyRule) string {
	t.Helper()
	ctx := testContext(t)
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: user}, Rules: rules}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: user},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}}
	for _, obj := range []client.Object{role, binding} {
		if err := c.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	path, err := c.KubeconfigAs(user, user+".kubeconfig")
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// ociConfigFile registers a new API key with the emulator and writes it as
// an OCI config file's DEFAULT profile.
func ociConfigFile(t *testing.T, emu *ociemu.Emulator) string {
	t.Helper()
	key, err := emu.NewAPIKey()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "key.pem")
	config := fmt.Sprintf("[DEFAULT]\nuser=%s\nfingerprint=%s\ntenancy=%s\nregion=%s\nkey_file=%s\n",
		key.User.User, key.Fingerprint, key.Tenancy, key.Region, keyFile)
	path := filepath.Join(dir, "config")
	if err := errors.Join(os.WriteFile(keyFile, key.PrivateKeyPEM, 0o600), os.WriteFile(path, []byte(config), 0o600)); err != nil {
		t.Fatal(err)
	}
	return path
}

// runPlan runs lbregistrar plan and returns what it printed and its exit status.
func runPlan(t *testing.T, args ...string) (string, int) {
	t.Helper()
	return runPlanIn(t, nil, args...)
}

// runPlanIn is runPlan with env added to the environment.
func runPlanIn(t *testing.T, env []string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.CommandContext(testContext(t), lbregistrar(t), append([]string{"plan"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		t.Logf("lbregistrar plan %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
		return string(out), exit.ExitCode()
	case err != nil:
		t.Fatalf("lbregistrar plan %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out), 0
}

// pendingIn lists the writes of a plan -o json, in sortedChanges' order.
func pendingIn(t *testing.T, planJSON string) []preview.BackendSetChange {
	t.Helper()
	var report struct {
		LBRegistrars []reconciler.ResourcePlan `json:"lbregistrars"`
	}
	if err := json.Unmarshal([]byte(planJSON), &report); err != nil {
		t.Fatalf("plan -o json: %v\n%s", err, planJSON)
	}
	var pending []preview.BackendSetChange
	for _, rp := range report.LBRegistrars {
		for _, c := range rp.BackendSets {
			if c.Changed() {
				pending = append(pending, c)
			}
		}
	}
	return sortedChanges(pending)
}

// sortedChanges orders changes by load balancer, backend set and resource.
func sortedChanges(changes []preview.BackendSetChange) []preview.BackendSetChange {
	out := slices.Clone(changes)
	slices.SortFunc(out, func(a, b preview.BackendSetChange) int {
		return cmp.Or(cmp.Compare(a.LoadBalancerID, b.LoadBalancerID), cmp.Compare(a.BackendSet, b.BackendSet), cmp.Compare(a.LBRegistrar, b.LBRegistrar))
	})
	return out
}

// getJSON decodes the answer of a GET over plain HTTP.
func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}
