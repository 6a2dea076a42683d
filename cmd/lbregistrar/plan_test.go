package main

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/reconciler"
	"github.com/peppy-ratio/lbregistrar/reconciler/oci"
	"github.com/peppy-ratio/lbregistrar/reconciler/preview"
)

// --oci-config reads a profile's key in the SDK's config format; the region
// is left to each resource.
func TestAPIKeyFromConfig(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "key.pem")
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	config := filepath.Join(dir, "config")
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(config, []byte(`[DEFAULT]
user=ocid1.user.oc1..default
fingerprint=aa:bb
tenancy=ocid1.tenancy.oc1..default
region=us-ashburn-1
key_file=`+keyFile+`

[PROD]
user=ocid1.user.oc1..prod
fingerprint=12:34
tenancy=ocid1.tenancy.oc1..prod
region=ap-tokyo-1
key_file=`+keyFile+`
`), 0o600); err != nil {
		t.Fatal(err)
	}

	got, err := apiKeyFromConfig(config, "PROD")
	if err != nil {
		t.Fatal(err)
	}
	want := &oci.Credentials{Tenancy: "ocid1.tenancy.oc1..prod", User: "ocid1.user.oc1..prod", Fingerprint: "12:34", PrivateKey: keyPEM}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("credentials of profile PROD (-want +got):\n%s", diff)
	}
	if _, err := apiKeyFromConfig(config, "MISSING"); err == nil || !strings.Contains(err.Error(), "MISSING") {
		t.Errorf("a missing profile: err = %v, want one naming it", err)
	}
}

// The text report groups by load balancer and resource and shows every kind
// of change, the backend sets that cannot be written, the conditions that
// are not the usual ones, and a summary.
func TestPlanReportText(t *testing.T) {
	const lb = "ocid1.loadbalancer.oc1.iad.a"
	calm := []metav1.Condition{
		{Type: v1beta1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1beta1.ReasonRegistered, Message: "every backend set has the backends this resource should own"},
		{Type: v1beta1.ConditionDegraded, Status: metav1.ConditionFalse, Reason: v1beta1.ReasonAsExpected, Message: "every target resolved"},
	}
	held := []metav1.Condition{
		{Type: v1beta1.ConditionReady, Status: metav1.ConditionFalse, Reason: v1beta1.ReasonHeld, Message: "backend sets edge keep their registered backends until the Degraded condition clears"},
		{Type: v1beta1.ConditionDegraded, Status: metav1.ConditionTrue, Reason: "NoReadyEndpoints", Message: "no ready endpoint"},
		{Type: v1beta1.ConditionConflict, Status: metav1.ConditionFalse, Reason: v1beta1.ReasonAsExpected, Message: "no other LBRegistrar claims these backend sets"},
	}
	report := planReport{PendingWrites: 2, LBRegistrars: []reconciler.ResourcePlan{
		{LBRegistrar: "web", LoadBalancerID: lb, Conditions: held, BackendSets: []preview.BackendSetChange{
			{BackendSet: "edge", Mode: "hold", Kept: []preview.KeptBackend{{Backend: "10.0.0.1:30443", Weight: 1}}},
			{BackendSet: "old", Mode: "retire", Removed: []preview.BackendWeight{{Backend: "10.0.0.1:31000", Weight: 1}},
				Kept: []preview.KeptBackend{{Backend: "10.0.0.9:31000", Weight: 1, Foreign: true}}},
		}},
		{LBRegistrar: "api", LoadBalancerID: lb, Conditions: calm, BackendSets: []preview.BackendSetChange{
			{BackendSet: "api", Mode: "apply", Added: []preview.BackendWeight{{Backend: "10.0.0.3:30080", Weight: 2}},
				Reweighted: []preview.Reweighted{{Backend: "10.0.0.1:30080", From: 1, To: 2}}},
			{BackendSet: "gone", Mode: "apply", NotFound: true},
		}},
		{LBRegistrar: "keyless", LoadBalancerID: "ocid1.loadbalancer.oc1.iad.b", Error: "spec.apiKey.privateKey: Secret keys/key has no key \"pem\", or does not exist"},
		{LBRegistrar: "paused", LoadBalancerID: "ocid1.loadbalancer.oc1.iad.b", Suspended: true, DeletionPolicy: v1beta1.DeletionPolicyOrphan},
		{LBRegistrar: "retiring", LoadBalancerID: "ocid1.loadbalancer.oc1.iad.b", Deletion: "drained for 30s, then removed", BackendSets: []preview.BackendSetChange{
			{BackendSet: "edge", Mode: "remove", Removed: []preview.BackendWeight{{Backend: "10.0.0.1:30443", Weight: 1}}},
		}},
	}}
	var out bytes.Buffer
	if err := report.writeText(&out); err != nil {
		t.Fatal(err)
	}
	want := `load balancer ocid1.loadbalancer.oc1.iad.a
  LBRegistrar api
    backend set api: 1 to add, 0 to remove, 1 to re-weight
      + 10.0.0.3:30080 weight 2
      ~ 10.0.0.1:30080 weight 1 -> 2
    backend set gone: not found in the load balancer
    Ready=True Registered: every backend set has the backends this resource should own
  LBRegistrar web
    backend set edge, held (what is registered stays): no change
        10.0.0.1:30443 weight 1
    backend set old, no longer in the spec: 0 to add, 1 to remove, 0 to re-weight
      - 10.0.0.1:31000 weight 1
        10.0.0.9:31000 weight 1 (not this resource's)
    Ready=False Held: backend sets edge keep their registered backends until the Degraded condition clears
    Degraded=True NoReadyEndpoints: no ready endpoint
load balancer ocid1.loadbalancer.oc1.iad.b
  LBRegistrar keyless
    cannot read its backend sets: spec.apiKey.privateKey: Secret keys/key has no key "pem", or does not exist
  LBRegistrar paused
    suspended: nothing is written until spec.suspend is lifted
    deletionPolicy Orphan: deleting it leaves its backends registered
  LBRegistrar retiring
    deleted, its backends would be drained for 30s, then removed
    backend set edge: 0 to add, 1 to remove, 0 to re-weight
      - 10.0.0.1:30443 weight 1
Plan: 2 backend set(s) to write, 1 unchanged.
`
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("plan text (-want +got):\n%s", diff)
	}
}

func TestPlanNamesResources(t *testing.T) {
	all := []v1beta1.LBRegistrar{{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, {ObjectMeta: metav1.ObjectMeta{Name: "b"}}}
	if got, err := named(all, []string{"b"}); err != nil || len(got) != 1 || got[0].Name != "b" {
		t.Errorf("named(b) = %v, %v", got, err)
	}
	if _, err := named(all, []string{"a", "c"}); err == nil || err.Error() != "LBRegistrar c not found" {
		t.Errorf("named(a, c): err = %v, want c not found", err)
	}
}
