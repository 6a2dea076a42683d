package e2e

import (
	"encoding/json"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/peppy-ratio/lbregistrar/api/v1alpha1"
	"github.com/peppy-ratio/lbregistrar/test/kube"
	"github.com/peppy-ratio/lbregistrar/test/ociemu"
)

// classicIngress is the classic load balancer of cmd/localrun/seed.yaml;
// its backend set "ingress" has 10.0.0.99:30443, registered by someone else.
const classicIngress = "ocid1.loadbalancer.oc1.ap-tokyo-1.aaaaaaaaw3qjxjtp6pcc5a2sf6vwhrr7eoxqvsmbm3tcfpgpqbazdexample"

// classicIngressRegistrar registers NodePort 30443 of every node in the
// classic load balancer's backend set "ingress", with the API key apiKeyFor
// makes.
const classicIngressRegistrar = `apiVersion: nodes.peppy-ratio.dev/v1alpha1
kind: LBRegistrar
metadata:
  name: legit
spec:
  loadBalancerId: ` + classicIngress + `
  backendSetName: ingress
  nodePort: 30443
` + apiKeySpec

// apiKeySpec is the apiKey of the manifests here, for the key apiKeyFor
// makes.
const apiKeySpec = `  apiKey:
    user: ocid1.user.oc1..aaaaaaaaexample
    fingerprint: "12:34:56:78:90:ab:cd:ef:12:34:56:78:90:ab:cd:ef"
    tenancy: ocid1.tenancy.oc1..aaaaaaaaexample
    region: ap-tokyo-1
    privateKey:
      namespace: lbregistrar-system
      secretKeyRef: {name: oci-api-key, key: private-key}
`

// A user who may write LBRegistrars tries to smuggle, through the v1alpha1
// conversion annotation, an ownership record of someone else's backend and
// spec values no rule would pass; kubectl is refused with every problem
// named, nothing is stored, and the controller, which keeps running and
// registers a legitimate resource in the same backend set, leaves the
// foreign backend where it is. Sending the annotation back as read (a
// kubectl get | kubectl apply round trip) still works; changing it does not.
func TestForgedConversionAnnotationIsRefused(t *testing.T) {
	t.Parallel()
	c, emu := clusterWithWorkload(t, 0)
	ctx := testContext(t)

	serveAdmitting(t, c, emu)

	legit := apiKeyFor(t, c, emu, classicIngressRegistrar)
	forgedData, err := json.Marshal(map[string]any{
		"spec": map[string]any{
			"loadBalancerId": classicIngress,
			"apiKey": map[string]any{
				"user": "u", "fingerprint": "f", "tenancy": "t", "region": "ap-tokyo-1",
				"privateKey": map[string]any{"namespace": kube.Namespace, "secretKeyRef": map[string]any{"name": "oci-api-key", "key": "private-key"}},
				"passphrase": map[string]any{"namespace": "kube-system", "secretKeyRef": map[string]any{"name": "other-teams-key", "key": "passphrase"}},
			},
			"services": []any{
				map[string]any{"nodePort": 30080, "backendSetName": "ingress-http", "weight": 1},
				map[string]any{"nodePort": 70000, "backendSetName": "ingress", "weight": 1000},
			},
		},
		"status": map[string]any{"backendSets": []any{map[string]any{
			"name": "ingress", "backends": []any{map[string]any{"ip": "10.0.0.99", "port": 30443, "weight": 1}},
		}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	forged := strings.NewReplacer("name: legit", "name: forged",
		"backendSetName: ingress", "backendSetName: ingress-http",
		"nodePort: 30443", "nodePort: 30080",
		"metadata:", "metadata:\n  annotations:\n    "+v1alpha1.HubDataAnnotation+": '"+string(forgedData)+"'").Replace(legit)

	_, stderr, err := c.Kubectl(ctx, forged, "apply", "-f", "-")
	if err == nil {
		t.Fatal("kubectl apply of a forged conversion annotation succeeded")
	}
	for _, want := range []string{
		"metadata.annotations[" + v1alpha1.HubDataAnnotation + "]: Forbidden: written only by conversion",
		"].nodePort: Invalid value: 70000",
		"].weight: Invalid value: 1000",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("kubectl's error does not name %q:\n%s", want, stderr)
		}
	}
	if _, _, err := c.Kubectl(ctx, "", "get", "lbregistrar", "forged"); err == nil {
		t.Error("the forged LBRegistrar was stored")
	}

	kubectl(t, c, legit, "apply", "-f", "-")
	waitAllReady(t, c, 1, 2*time.Minute)
	registered := backendsOf(t, emu, classicIngress, "ingress")
	if want := []string{"10.0.0.1:30443", "10.0.0.2:30443", "10.0.0.99:30443"}; !slices.Equal(registered, want) {
		t.Errorf("backend set ingress has %v, want %v", registered, want)
	}

	// The round trip through v1alpha1 carries the stored annotation as read.
	read, _ := kubectl(t, c, "", "get", "lbregistrars.v1alpha1.nodes.peppy-ratio.dev", "legit", "-o", "yaml")
	if !strings.Contains(read, v1alpha1.HubDataAnnotation) {
		t.Fatalf("a Ready resource read as v1alpha1 carries no %s:\n%s", v1alpha1.HubDataAnnotation, read)
	}
	kubectl(t, c, read, "apply", "-f", "-")
	read, _ = kubectl(t, c, "", "get", "lbregistrars.v1alpha1.nodes.peppy-ratio.dev", "legit", "-o", "yaml")
	tampered := strings.Replace(read, `"addresses":"10.0.0.1`, `"addresses":"10.0.0.99`, 1)
	if tampered == read {
		t.Fatalf("no ownership record of 10.0.0.1 in the annotation:\n%s", read)
	}
	_, stderr, err = c.Kubectl(ctx, tampered, "replace", "-f", "-")
	if err == nil || !strings.Contains(stderr, "written only by conversion") {
		t.Errorf("replacing the ownership record through the annotation: err %v\n%s", err, stderr)
	}

	if got := backendsOf(t, emu, classicIngress, "ingress"); !slices.Contains(got, "10.0.0.99:30443") {
		t.Errorf("the foreign backend is gone: %v", got)
	}
}

// backendsOf lists a backend set's backends as sorted ip:port.
func backendsOf(t *testing.T, emu *ociemu.Emulator, lb, set string) []string {
	t.Helper()
	backends, err := emu.Backends(lb, set)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, b := range backends {
		out = append(out, net.JoinHostPort(b.IPAddress, strconv.Itoa(b.Port)))
	}
	slices.Sort(out)
	return out
}
