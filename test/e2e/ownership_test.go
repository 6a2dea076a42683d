package e2e

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peppy-ratio/lbregistrar/api/v1alpha1"
	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/test/eventually"
	"github.com/peppy-ratio/lbregistrar/test/kube"
)

// A user who may write only the status subresource (cluster tooling, a
// backup tool, the original operator's service account) cannot change an
// ownership record, through either version: kubectl is refused naming the
// field. Writing conditions, and a v1alpha1 phase as the original operator
// does, still works, and the phase leaves the record alone, so deleting
// the resource afterwards removes its own backends and nothing else.
func TestStatusWritersCannotChangeTheRecord(t *testing.T) {
	t.Parallel()
	c, emu := clusterWithWorkload(t, 0)
	ctx := testContext(t)
	serveAdmitting(t, c, emu)
	kubectl(t, c, apiKeyFor(t, c, emu, classicIngressRegistrar), "apply", "-f", "-")
	waitAllReady(t, c, 1, 2*time.Minute)
	want := []string{"10.0.0.1:30443", "10.0.0.2:30443", "10.0.0.99:30443"}
	if got := backendsOf(t, emu, classicIngress, "ingress"); !slices.Equal(got, want) {
		t.Fatalf("backend set ingress has %v, want %v", got, want)
	}
	recorded := func() v1beta1.LBRegistrarStatus {
		var obj v1beta1.LBRegistrar
		if err := c.Client.Get(ctx, client.ObjectKey{Name: "legit"}, &obj); err != nil {
			t.Fatal(err)
		}
		return obj.Status
	}
	before := recorded()
	if before.RecordSignature == "" || len(before.BackendSets) != 1 {
		t.Fatalf("the controller's record: %+v", before)
	}

	writer := statusWriterKubeconfig(t, c)
	as := func(stdin string, args ...string) (string, error) {
		_, stderr, err := c.Kubectl(ctx, stdin, append([]string{"--kubeconfig", writer}, args...)...)
		return stderr, err
	}
	for name, patch := range map[string]string{
		"status.backendSets":    `{"status":{"backendSets":[{"name":"ingress","backends":[{"port":30443,"weight":1,"addresses":"10.0.0.1 10.0.0.2 10.0.0.99"}]}]}}`,
		"status.loadBalancerId": `{"status":{"loadBalancerId":"ocid1.networkloadbalancer.oc1.ap-tokyo-1.amaaaaaaw3qjxjtp6pcc5a2sf6vwhrr7eoxqvsmbm3tcfpgpqbexample"}}`,
	} {
		stderr, err := as("", "patch", "lbregistrar", "legit", "--subresource=status", "--type=merge", "-p", patch)
		if err == nil || !strings.Contains(stderr, name+": Forbidden: only the lbregistrar controller") {
			t.Errorf("patching %s as a status writer: err %v\n%s", name, err, stderr)
		}
	}

	// Through v1alpha1 a status write carries only the phase: the API
	// server keeps the stored annotation, so a record forged in it is not
	// stored. The phase alone changes only Ready.
	read, _ := kubectl(t, c, "", "get", "lbregistrars.v1alpha1.nodes.peppy-ratio.dev", "legit", "-o", "json")
	var alpha map[string]any
	if err := json.Unmarshal([]byte(read), &alpha); err != nil {
		t.Fatal(err)
	}
	annotations := alpha["metadata"].(map[string]any)["annotations"].(map[string]any)
	kept := annotations[v1alpha1.HubDataAnnotation].(string)
	annotations[v1alpha1.HubDataAnnotation] = strings.Replace(kept, `"addresses":"10.0.0.1 10.0.0.2"`, `"addresses":"10.0.0.1 10.0.0.2 10.0.0.99"`, 1)
	if annotations[v1alpha1.HubDataAnnotation] == kept {
		t.Fatalf("no record of 10.0.0.1 10.0.0.2 in the annotation: %s", kept)
	}
	forged, _ := json.Marshal(alpha)
	_, _ = as(string(forged), "replace", "--subresource=status", "-f", "-")
	if now := recorded(); !equalRecords(now.BackendSets, before.BackendSets) || now.RecordSignature != before.RecordSignature {
		t.Fatalf("a v1alpha1 status write carrying a forged record changed the record:\nbefore %+v\nnow    %+v", before, now)
	}
	read, _ = kubectl(t, c, "", "get", "lbregistrars.v1alpha1.nodes.peppy-ratio.dev", "legit", "-o", "json")
	if err := json.Unmarshal([]byte(read), &alpha); err != nil {
		t.Fatal(err)
	}
	alpha["status"] = map[string]any{"phase": "PENDING"}
	pending, _ := json.Marshal(alpha)
	if stderr, err := as(string(pending), "replace", "--subresource=status", "-f", "-"); err != nil {
		t.Fatalf("the original operator's phase write: %v\n%s", err, stderr)
	}
	after := recorded()
	if ready := meta.FindStatusCondition(after.Conditions, v1beta1.ConditionReady); ready == nil || ready.Reason != v1beta1.ReasonPending {
		t.Errorf("Ready after the phase write: %+v", ready)
	}
	if after.LoadBalancerID != before.LoadBalancerID || after.RecordSignature != before.RecordSignature || !equalRecords(after.BackendSets, before.BackendSets) {
		t.Errorf("the phase write changed the record:\nbefore %+v\nafter  %+v", before, after)
	}
	if stderr, err := as("", "patch", "lbregistrar", "legit", "--subresource=status", "--type=merge", "-p",
		`{"status":{"healthy":"9/9"}}`); err != nil {
		t.Errorf("a status writer setting what is not the record: %v\n%s", err, stderr)
	}

	kubectl(t, c, "", "delete", "lbregistrar", "legit", "--timeout=60s")
	if got := backendsOf(t, emu, classicIngress, "ingress"); !slices.Equal(got, []string{"10.0.0.99:30443"}) {
		t.Errorf("after deletion the backend set has %v, want only the foreign 10.0.0.99:30443", got)
	}
}

// A record planted in the conversion annotation while only the original
// operator's CRD was installed (no webhook saw it) is not believed at
// takeover: plan says it is ignored and removes nothing, the controller
// adopts what the resource wants, and deleting it leaves the foreign
// backend the record named.
func TestRecordPlantedBeforeInstallIsIgnored(t *testing.T) {
	t.Parallel()
	c, emu := clusterWithWorkload(t, 0)
	ctx := testContext(t)
	installOldOperatorCRD(t, c)
	planted, err := json.Marshal(map[string]any{"status": map[string]any{
		"loadBalancerId": classicIngress,
		"backendSets": []any{map[string]any{"name": "ingress", "backends": []any{
			map[string]any{"port": 30443, "weight": 1, "addresses": "10.0.0.1 10.0.0.2 10.0.0.99"}}}},
		"conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": "Registered", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	objects := strings.Replace(classicIngressRegistrar, "metadata:", "metadata:\n  annotations:\n    "+v1alpha1.HubDataAnnotation+": '"+string(planted)+"'", 1)
	kubectl(t, c, apiKeyFor(t, c, emu, objects), "apply", "-f", "-")
	kubectl(t, c, "", "patch", "lbregistrar", "legit", "--subresource=status", "--type=merge", "-p", `{"status":{"phase":"READY"}}`)
	before := backendsOf(t, emu, classicIngress, "ingress")

	// Planned before the switch, as the README says to.
	out, status := runPlan(t, "--kubeconfig", c.Kubeconfig, "--oci-loadbalancer-endpoint="+emu.URL(), "--oci-networkloadbalancer-endpoint="+emu.URL(), "--oci-core-endpoint="+emu.URL())
	if status != 0 || !strings.Contains(out, "ownership record ignored") || strings.Contains(out, "- 10.0.0.99") {
		t.Errorf("plan (exit %d) does not ignore the planted record, or removes the foreign backend:\n%s", status, out)
	}
	serve := newServeProcess()
	serve.startInstalled(t, c, c.Kubeconfig, nil, "--webhook-host=127.0.0.1", "--secret-namespaces="+kube.Namespace,
		"--oci-loadbalancer-endpoint="+emu.URL(), "--oci-networkloadbalancer-endpoint="+emu.URL(), "--oci-core-endpoint="+emu.URL(), "--resync-period=1h")
	serve.waitReady(t)
	waitAllReady(t, c, 1, 2*time.Minute)
	eventually.Passes(t, 30*time.Second, 100*time.Millisecond, func() error {
		var obj v1beta1.LBRegistrar
		if err := c.Client.Get(ctx, client.ObjectKey{Name: "legit"}, &obj); err != nil {
			return err
		}
		if obj.Status.RecordSignature == "" || len(obj.Status.BackendSets) != 1 || obj.Status.BackendSets[0].OwnedCount() != 2 {
			return fmt.Errorf("record %+v", obj.Status)
		}
		return nil
	})
	if got, want := backendsOf(t, emu, classicIngress, "ingress"), []string{"10.0.0.1:30443", "10.0.0.2:30443", "10.0.0.99:30443"}; !slices.Equal(got, want) {
		t.Errorf("after the takeover the backend set has %v, want %v (was %v)", got, want, before)
	}
	kubectl(t, c, "", "delete", "lbregistrar", "legit", "--timeout=60s")
	if got := backendsOf(t, emu, classicIngress, "ingress"); !slices.Equal(got, []string{"10.0.0.99:30443"}) {
		t.Errorf("after deletion the backend set has %v, want only the foreign 10.0.0.99:30443", got)
	}
}

// An identity planted in the conversion annotation while only the original
// operator's CRD was installed (no webhook saw it; that CRD takes empty
// apiKey strings) is not used after install: plan names it, the controller
// says Ready=False, UncheckedIdentity, and signs nothing in as the
// ServiceAccount. Removing the mark is a write checked as one naming the
// ServiceAccount: refused to a user who may not create its tokens, allowed
// to one who may, and then the controller signs in as it.
func TestIdentityPlantedBeforeInstallIsNotUsed(t *testing.T) {
	t.Parallel()
	c, emu := clusterWithWorkload(t, 0)
	ctx := testContext(t)
	installOldOperatorCRD(t, c)
	planted, err := json.Marshal(map[string]any{"spec": map[string]any{
		"loadBalancerId":   classicIngress,
		"services":         []any{map[string]any{"nodePort": 30443, "backendSetName": "ingress", "weight": 1}},
		"workloadIdentity": map[string]any{"region": "ap-tokyo-1", "serviceAccount": map[string]any{"namespace": kube.Namespace, "name": "lb-writer"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	kubectl(t, c, `apiVersion: v1
kind: ServiceAccount
metadata: {name: lb-writer, namespace: `+kube.Namespace+`}
---
apiVersion: nodes.peppy-ratio.dev/v1alpha1
kind: LBRegistrar
metadata:
  name: planted
  annotations:
    `+v1alpha1.HubDataAnnotation+`: '`+string(planted)+`'
spec:
  loadBalancerId: `+classicIngress+`
  backendSetName: ingress
  nodePort: 30443
  apiKey: {user: "", fingerprint: "", tenancy: "", region: ap-tokyo-1, privateKey: {namespace: "", secretKeyRef: {name: "", key: ""}}}
`, "apply", "-f", "-")
	before := backendsOf(t, emu, classicIngress, "ingress")

	const unchecked = "spec.workloadIdentity.serviceAccount: the workload identity of service account lbregistrar-system/lb-writer came from the " + v1alpha1.HubDataAnnotation + " annotation, which no admission check saw"
	out, status := runPlan(t, "--kubeconfig", c.Kubeconfig, "--oci-loadbalancer-endpoint="+emu.URL(), "--oci-networkloadbalancer-endpoint="+emu.URL(), "--oci-core-endpoint="+emu.URL())
	if status != 1 || !strings.Contains(out, unchecked) {
		t.Errorf("plan (exit %d) does not name the unchecked identity:\n%s", status, out)
	}
	serve := newServeProcess()
	env, args := workloadIdentityAt(t, c, emu)
	serve.Env = env
	serve.startAdmitting(t, c, emu, args...)
	eventually.Passes(t, 30*time.Second, 100*time.Millisecond, func() error {
		var obj v1beta1.LBRegistrar
		if err := c.Client.Get(ctx, client.ObjectKey{Name: "planted"}, &obj); err != nil {
			return err
		}
		if ready := meta.FindStatusCondition(obj.Status.Conditions, v1beta1.ConditionReady); ready == nil || ready.Reason != "UncheckedIdentity" || !strings.Contains(ready.Message, unchecked) {
			return fmt.Errorf("Ready = %+v", ready)
		}
		return nil
	})

	writer := []rbacv1.PolicyRule{{APIGroups: []string{v1beta1.GroupVersion.Group}, Resources: []string{"lbregistrars"}, Verbs: []string{"get", "list", "update", "patch"}}}
	mallory := kubeconfigWithRules(t, c, "mallory", writer)
	alice := kubeconfigWithRules(t, c, "alice", append(writer,
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"serviceaccounts/token"}, ResourceNames: []string{"lb-writer"}, Verbs: []string{"create"}}))
	// Through v1beta1, which shows the mark.
	unmark := []string{"annotate", "lbregistrars.v1beta1.nodes.peppy-ratio.dev", "planted", v1alpha1.UncheckedIdentityAnnotation + "-"}
	_, stderr, err := c.Kubectl(ctx, "", append([]string{"--kubeconfig", mallory}, unmark...)...)
	if want := "spec.workloadIdentity.serviceAccount: Forbidden: mallory may not create tokens for ServiceAccount lbregistrar-system/lb-writer"; err == nil || !strings.Contains(stderr, want) {
		t.Errorf("mallory removing the mark: want %q; err=%v stderr:\n%s", want, err, stderr)
	}
	for _, call := range emu.Calls() {
		if call.Operation == "UpdateBackendSet" {
			t.Fatalf("the unchecked identity wrote the backend set: %+v", call)
		}
	}
	if got := backendsOf(t, emu, classicIngress, "ingress"); !slices.Equal(got, before) {
		t.Fatalf("the backend set has %v, was %v", got, before)
	}

	kubectl(t, c, "", append([]string{"--kubeconfig", alice}, unmark...)...)
	waitAllReady(t, c, 1, time.Minute)
	for _, call := range emu.Calls() {
		if call.Operation == "UpdateBackendSet" && call.Principal != "system:serviceaccount:"+kube.Namespace+":lb-writer" {
			t.Errorf("a write signed by %q", call.Principal)
		}
	}
}

// statusWriterKubeconfig is a kubeconfig of a user who may read
// LBRegistrars and write their status subresource, nothing more.
func statusWriterKubeconfig(t *testing.T, c *kube.Cluster) string {
	t.Helper()
	return kubeconfigWithRules(t, c, "status-writer", []rbacv1.PolicyRule{
		{APIGroups: []string{v1beta1.GroupVersion.Group}, Resources: []string{"lbregistrars"}, Verbs: []string{"get", "list"}},
		{APIGroups: []string{v1beta1.GroupVersion.Group}, Resources: []string{"lbregistrars/status"}, Verbs: []string{"get", "update", "patch"}},
	})
}

// equalRecords compares ownership records backend by backend.
func equalRecords(a, b []v1beta1.BackendSetStatus) bool {
	return slices.EqualFunc(a, b, func(x, y v1beta1.BackendSetStatus) bool {
		return x.Name == y.Name && slices.Equal(x.Owned(), y.Owned())
	})
}

// installOldOperatorCRD installs the original operator's CRD, as a cluster
// has it before lbregistrar is installed.
func installOldOperatorCRD(t *testing.T, c *kube.Cluster) {
	t.Helper()
	kubectl(t, c, testdata(t, "old-operator-crd.yaml"), "apply", "-f", "-")
	kubectl(t, c, "", "wait", "--for=condition=Established", "crd/"+kube.CRDName, "--timeout=60s")
}
