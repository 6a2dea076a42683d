package main

import (
	"maps"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// config/network-policy selects the Deployment's pods and allows exactly
// the ports its container serves, by the names it gives them: the webhook
// and health ports to anyone, the metrics port to the scraper's namespaces;
// nothing else reaches the pods.
func TestNetworkPoliciesFitTheDeployment(t *testing.T) {
	var deployment object
	for _, obj := range kustomize(t, "default") {
		if obj["kind"] == "Deployment" {
			deployment = obj
		}
	}
	podLabels := field(deployment, "spec.template.metadata.labels").(map[string]any)
	served := map[string]bool{}
	for _, port := range field(deployment, "spec.template.spec.containers.0.ports").([]any) {
		served[port.(map[string]any)["name"].(string)] = true
	}

	allowed := map[string]any{} // port name: peers allowed, nil for anyone
	for _, policy := range kustomize(t, "network-policy") {
		if policy["kind"] != "NetworkPolicy" {
			t.Errorf("config/network-policy contains a %s", policy["kind"])
			continue
		}
		selector := field(policy, "spec.podSelector.matchLabels").(map[string]any)
		for k, v := range selector {
			if podLabels[k] != v {
				t.Errorf("%s selects %s=%v, which the Deployment's pods do not carry", key(policy), k, v)
			}
		}
		if types := field(policy, "spec.policyTypes"); !cmp.Equal(types, []any{"Ingress"}) {
			t.Errorf("%s: policyTypes %v, want [Ingress]: egress goes to the API server and OCI", key(policy), types)
		}
		for _, rule := range field(policy, "spec.ingress").([]any) {
			for _, port := range rule.(map[string]any)["ports"].([]any) {
				name, _ := port.(map[string]any)["port"].(string)
				if !served[name] {
					t.Errorf("%s allows port %q, which the container does not name", key(policy), port)
				}
				allowed[name] = rule.(map[string]any)["from"]
			}
		}
	}
	if got := slices.Sorted(maps.Keys(allowed)); !cmp.Equal(got, slices.Sorted(maps.Keys(served))) {
		t.Errorf("ports allowed %v, ports served %v", got, slices.Sorted(maps.Keys(served)))
	}
	want := []any{map[string]any{"namespaceSelector": map[string]any{"matchLabels": map[string]any{"metrics": "enabled"}}}}
	if diff := cmp.Diff(want, allowed["metrics"]); diff != "" {
		t.Errorf("metrics port peers (-want +got):\n%s", diff)
	}
	for _, open := range []string{"webhook", "health"} {
		if allowed[open] != nil {
			t.Errorf("%s port limited to %v: the API server and the kubelet are seldom pods a selector names", open, allowed[open])
		}
	}
}
