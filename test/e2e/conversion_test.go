package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peppy-ratio/lbregistrar/api/v1alpha1"
	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
)

const deprecationWarning = "Warning: nodes.peppy-ratio.dev/v1alpha1 LBRegistrar is deprecated; use nodes.peppy-ratio.dev/v1beta1"

// The original operator's users keep applying their v1alpha1 objects; they
// are stored as v1beta1 through the conversion webhook and read back
// unchanged in v1alpha1.
func TestApplyV1alpha1SingleServiceReadsBackInBothVersions(t *testing.T) {
	t.Parallel()
	c := shared(t)
	manifest := testdata(t, "seed000-single-service.yaml")
	applied := object(t, manifest)
	name := applied["metadata"].(map[string]any)["name"].(string)

	_, stderr := kubectl(t, c, manifest, "apply", "-f", "-")
	if !strings.Contains(stderr, deprecationWarning) {
		t.Errorf("kubectl apply did not print the deprecation warning; stderr:\n%s", stderr)
	}

	out, _ := kubectl(t, c, "", "get", "lbregistrars.v1beta1.nodes.peppy-ratio.dev", name, "-o", "yaml")
	beta := object(t, out)
	wantServices := []any{map[string]any{
		"name":           "istio-ingressgateway",
		"namespace":      "istio-system",
		"port":           "https",
		"backendSetName": "ingress",
		"weight":         float64(1),
	}}
	if diff := cmp.Diff(wantServices, beta["spec"].(map[string]any)["services"]); diff != "" {
		t.Errorf("v1beta1 services (-want +got):\n%s", diff)
	}

	out, _ = kubectl(t, c, "", "get", "lbregistrars.v1alpha1.nodes.peppy-ratio.dev", name, "-o", "json")
	alpha := object(t, out)
	// The schema's defaults (weight 1, here and in service) are the only
	// additions the API server makes.
	want := applied["spec"].(map[string]any)
	want["weight"] = float64(1)
	want["service"].(map[string]any)["weight"] = float64(1)
	if diff := cmp.Diff(want, alpha["spec"]); diff != "" {
		t.Errorf("v1alpha1 spec read back (-applied +got):\n%s", diff)
	}
}

// A v1beta1 resource of fixed ports only shows the first as nodePort in
// v1alpha1, and an edit through v1alpha1 keeps the others, once each.
func TestV1beta1FixedPortsEditedThroughV1alpha1(t *testing.T) {
	t.Parallel()
	c := shared(t)
	const service = "  - name: istio-ingressgateway\n    namespace: istio-system\n    port: https\n    backendSetName: ingress\n    weight: 1\n"
	manifest := betaManifest("fixed-ports", "ocid1.loadbalancer.oc1.ap-tokyo-1.aaaaaaaafixedports", "12:34:56:78:90:ab:cd:ef:12:34:56:78:90:ab:cd:ef")
	if !strings.Contains(manifest, service) {
		t.Fatal("the test manifest did not get its fixed ports")
	}
	manifest = strings.Replace(manifest, service,
		"  - {nodePort: 30080, backendSetName: http, weight: 1}\n  - {nodePort: 30443, backendSetName: https, weight: 1}\n", 1)
	kubectl(t, c, manifest, "apply", "-f", "-")

	out, _ := kubectl(t, c, "", "get", "lbregistrars.v1alpha1.nodes.peppy-ratio.dev", "fixed-ports", "-o", "json")
	spec := object(t, out)["spec"].(map[string]any)
	if spec["nodePort"] != float64(30080) || spec["backendSetName"] != "http" {
		t.Errorf("v1alpha1 view: nodePort %v in backend set %v, want 30080 in http", spec["nodePort"], spec["backendSetName"])
	}

	kubectl(t, c, "", "patch", "lbregistrars.v1alpha1.nodes.peppy-ratio.dev", "fixed-ports", "--type", "merge", "-p", `{"spec":{"weight":5}}`)
	out, _ = kubectl(t, c, "", "get", "lbregistrars.v1beta1.nodes.peppy-ratio.dev", "fixed-ports", "-o", "json")
	want := []any{
		map[string]any{"nodePort": float64(30080), "backendSetName": "http", "weight": float64(5)},
		map[string]any{"nodePort": float64(30443), "backendSetName": "https", "weight": float64(1)},
	}
	if diff := cmp.Diff(want, object(t, out)["spec"].(map[string]any)["services"]); diff != "" {
		t.Errorf("v1beta1 services after the v1alpha1 edit (-want +got):\n%s", diff)
	}
}

// A resource recording 5,000 nodes in each of 8 backend sets reads as
// v1alpha1, with its status kept in the conversion annotation (compressed:
// plain, it would pass the 256 KiB the API server allows all annotations),
// and a v1alpha1 read sent back unchanged keeps every record.
func TestLargeStatusReadsAsV1alpha1(t *testing.T) {
	t.Parallel()
	c := shared(t)
	ctx := testContext(t)
	const name, sets, nodes = "large-status", 8, 5000
	kubectl(t, c, betaManifest(name, "ocid1.loadbalancer.oc1.ap-tokyo-1.aaaaaaaalargestatus", "12:34:56:78:90:ab:cd:ef:12:34:56:78:90:ab:cd:ef"), "apply", "-f", "-")

	obj := &v1beta1.LBRegistrar{}
	if err := c.Client.Get(ctx, client.ObjectKey{Name: name}, obj); err != nil {
		t.Fatal(err)
	}
	base := obj.DeepCopy()
	for s := range sets {
		var owned []v1beta1.Backend
		for i := range nodes {
			owned = append(owned, v1beta1.Backend{IP: fmt.Sprintf("10.%d.%d.%d", 100+s, i/250, i%250+1), Port: 30443, Weight: 1})
		}
		rec := v1beta1.BackendSetStatus{Name: fmt.Sprintf("set-%d", s)}
		rec.SetOwned(owned)
		obj.Status.BackendSets = append(obj.Status.BackendSets, rec)
	}
	if err := c.Client.Status().Patch(ctx, obj, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}

	read, _ := kubectl(t, c, "", "get", "lbregistrars.v1alpha1.nodes.peppy-ratio.dev", name, "-o", "yaml")
	if !strings.Contains(read, v1alpha1.HubDataAnnotation+": gzip:") {
		t.Errorf("the v1alpha1 form keeps no compressed %s", v1alpha1.HubDataAnnotation)
	}
	kubectl(t, c, read, "replace", "-f", "-")

	after := &v1beta1.LBRegistrar{}
	if err := c.Client.Get(ctx, client.ObjectKey{Name: name}, after); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(obj.Status.BackendSets, after.Status.BackendSets); diff != "" {
		t.Errorf("records after a v1alpha1 round trip (-written +stored):\n%s", diff)
	}
}
