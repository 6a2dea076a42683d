package main

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v4/pkg/action"
	"sigs.k8s.io/yaml"
)

const root = "../.."

// helmOnlyMetadata are the labels and annotations the chart gives objects
// beyond what config/ does: Helm's own labels, and keeping the CRD when the
// release is uninstalled.
var helmOnlyMetadata = []string{
	"app.kubernetes.io/instance", "app.kubernetes.io/managed-by", "app.kubernetes.io/version", "helm.sh/chart",
	"helm.sh/resource-policy",
}

// The chart at its defaults installs what `kubectl apply -k config/default`
// does, object by object and field by field (kinds, names, RBAC rules,
// serve's arguments, everything), less Helm's own labels and the
// Namespace, which Helm is given rather than owns; certMode cert-manager
// installs what config/with-cert-manager does, and the monitoring toggles
// add what config/prometheus does. So config/ stays the one description of
// an install, and the chart cannot drift from it.
func TestChartInstallsWhatKustomizeDoes(t *testing.T) {
	for _, tc := range []struct {
		name     string
		values   string
		overlays []string
	}{
		{"defaults", "", []string{"default"}},
		{"certMode cert-manager", "certMode: cert-manager", []string{"with-cert-manager"}},
		{"serviceMonitor and prometheusRule", "serviceMonitor: {enabled: true}\nprometheusRule: {enabled: true}", []string{"default", "prometheus"}},
		{"networkPolicy", "networkPolicy: {enabled: true}", []string{"default", "network-policy"}},
		{"workloadIdentityServiceAccounts", "workloadIdentityServiceAccounts: [{namespace: lbregistrar-system, name: lbregistrar}]", []string{"default", "workload-identity"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := map[string]object{}
			for _, overlay := range tc.overlays {
				for _, obj := range kustomize(t, overlay) {
					if obj["kind"] != "Namespace" {
						want[key(obj)] = obj
					}
				}
			}
			got := map[string]object{}
			for _, obj := range render(t, tc.values) {
				dropHelmOnlyMetadata(obj)
				got[key(obj)] = obj
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("config/%s (-) and the chart with %q (+) differ:\n%s", strings.Join(tc.overlays, " + config/"), tc.values, diff)
			}
		})
	}
}

// Every value lands where values.yaml says: testdata/every-value.yaml sets
// each away from its default.
func TestChartValues(t *testing.T) {
	values, err := readValues("testdata/every-value.yaml")
	if err != nil {
		t.Fatal(err)
	}
	manifest, err := renderChart(root, values)
	if err != nil {
		t.Fatal(err)
	}
	objects := byKey(t, manifest)
	const (
		deployment = "Deployment lbregistrar-system/lbregistrar"
		pod        = "spec.template.spec."
		container  = pod + "containers.0."
	)
	for _, tc := range []struct {
		object, path string
		want         string // YAML
	}{
		{deployment, container + "image", "registry.example.com/lbregistrar:v1.2.3"},
		{deployment, container + "imagePullPolicy", "IfNotPresent"},
		{deployment, pod + "imagePullSecrets", "[{name: registry-credentials}]"},
		{deployment, "spec.replicas", "3"},
		{deployment, container + "resources", "{requests: {cpu: 100m, memory: 128Mi}, limits: {cpu: '1', memory: 512Mi}}"},
		{deployment, pod + "nodeSelector", `{node-role.kubernetes.io/control-plane: ""}`},
		{deployment, pod + "tolerations", "[{key: node-role.kubernetes.io/control-plane, operator: Exists, effect: NoSchedule}]"},
		{deployment, pod + "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms.0.matchExpressions",
			"[{key: kubernetes.io/os, operator: In, values: [linux]}]"},
		{deployment, pod + "topologySpreadConstraints.0.topologyKey", "topology.kubernetes.io/zone"},
		{deployment, pod + "priorityClassName", "system-cluster-critical"},
		{deployment, "spec.template.metadata.annotations", "{example.com/team: networking}"},
		{deployment, "spec.template.metadata.labels", "{app.kubernetes.io/name: lbregistrar, example.com/tier: infrastructure}"},
		{deployment, "spec.selector.matchLabels", "{app.kubernetes.io/name: lbregistrar}"},
		{deployment, container + "args", `[serve, --leader-elect, --cert-mode=cert-manager, --webhook-addr=:9443,
			--metrics-addr=:8080, --metrics-secure=true, --health-addr=:8081, --graceful-shutdown-timeout=100s,
			"--secret-namespaces=lbregistrar-system,team-a", --v=2, --webhook-client-ca-file=/etc/lbregistrar/client-ca/bundle.pem,
			--resync-period=5m, --oci-rate-limit=5]`},
		{deployment, container + "env", `[{name: POD_NAMESPACE, valueFrom: {fieldRef: {fieldPath: metadata.namespace}}}, {name: GOMEMLIMIT, value: 384MiB}, {name: OCI_RESOURCE_PRINCIPAL_REGION, value: ap-tokyo-1}]`},
		// The release namespace has the certificate's Secret, so it is
		// bound once whether secretNamespaces names it or not.
		{"RoleBinding team-a/lbregistrar-api-key-reader", "roleRef.name", "lbregistrar-api-key-reader"},
		{"RoleBinding lbregistrar-system/lbregistrar-api-key-reader", "subjects", "[{kind: ServiceAccount, name: lbregistrar, namespace: lbregistrar-system}]"},
		// Tokens by name, one Role per namespace.
		{"Role team-a/lbregistrar-workload-identity", "rules", `[{apiGroups: [""], resources: [serviceaccounts/token], resourceNames: [lb-writer, edge-writer], verbs: [create]}]`},
		{"Role lbregistrar-system/lbregistrar-workload-identity", "rules.0.resourceNames", "[lbregistrar]"},
		{"RoleBinding team-a/lbregistrar-workload-identity", "subjects", "[{kind: ServiceAccount, name: lbregistrar, namespace: lbregistrar-system}]"},
		{"Certificate lbregistrar-system/lbregistrar-webhook", "spec.secretName", "lbregistrar-webhook-tls"},
		{"CustomResourceDefinition /lbregistrars.nodes.peppy-ratio.dev", "metadata.annotations",
			"{cert-manager.io/inject-ca-from: lbregistrar-system/lbregistrar-webhook, controller-gen.kubebuilder.io/version: v0.23.0}"},
		{"ServiceMonitor lbregistrar-system/lbregistrar", "metadata.labels.release", "kube-prometheus-stack"},
		{"PrometheusRule lbregistrar-system/lbregistrar", "metadata.labels.role", "alert-rules"},
		{"ClusterRoleBinding /lbregistrar-metrics-reader", "subjects", "[{kind: ServiceAccount, name: prometheus-k8s, namespace: monitoring}]"},
		{"PodDisruptionBudget lbregistrar-system/lbregistrar", "spec.minAvailable", "1"},
		{"NetworkPolicy lbregistrar-system/lbregistrar-allow-webhook-traffic", "spec.ingress.0.from", "[{ipBlock: {cidr: 10.0.0.0/28}}]"},
		{"NetworkPolicy lbregistrar-system/lbregistrar-allow-metrics-traffic", "spec.ingress.0.from",
			"[{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: monitoring}}}]"},
		{deployment, container + "volumeMounts", "[{name: webhook-client-ca, mountPath: /etc/lbregistrar/client-ca, readOnly: true}]"},
		{deployment, pod + "volumes", "[{name: webhook-client-ca, configMap: {name: apiserver-client-ca}}]"},
	} {
		obj, ok := objects[tc.object]
		if !ok {
			t.Errorf("no %s", tc.object)
			continue
		}
		var want any
		if err := yaml.Unmarshal([]byte(tc.want), &want); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, field(obj, tc.path)); diff != "" {
			t.Errorf("%s %s (-want +got):\n%s", tc.object, tc.path, diff)
		}
	}
	if n := count(slices.Collect(maps.Values(objects)), "RoleBinding", "lbregistrar-api-key-reader"); n != 2 {
		t.Errorf("%d RoleBindings to lbregistrar-api-key-reader, want 2 (team-a, lbregistrar-system)", n)
	}
}

// One replica gets no PodDisruptionBudget, which would keep it from ever
// being evicted and so block node drains.
func TestChartOneReplicaHasNoDisruptionBudget(t *testing.T) {
	if n := count(render(t, "replicaCount: 1"), "PodDisruptionBudget", "lbregistrar"); n != 0 {
		t.Errorf("%d PodDisruptionBudgets for one replica", n)
	}
}

// values.schema.json refuses what the templates would otherwise render
// into something broken or silently ignore: an unknown certificate mode, a
// misspelled value, a wrong type.
func TestChartRefusesBadValues(t *testing.T) {
	for _, values := range []string{
		"certMode: vault",
		"replicas: 3", // replicaCount
		"serviceMonitor: {enable: true}",
		"secretNamespaces: team-a",
		"replicaCount: 0",
		"metricsReaders: [{name: prometheus}]",
		"workloadIdentityServiceAccounts: [{namespace: team-a}]",
	} {
		var parsed map[string]any
		if err := yaml.Unmarshal([]byte(values), &parsed); err != nil {
			t.Fatal(err)
		}
		if _, err := renderChart(root, parsed); err == nil {
			t.Errorf("%q: rendered", values)
		}
	}
}

// secretNamespaces adds to the release namespace, where the README's keys
// are kept, rather than replacing it.
func TestChartSecretNamespacesAdd(t *testing.T) {
	for _, obj := range render(t, "secretNamespaces: [team-a]") {
		if obj["kind"] != "Deployment" {
			continue
		}
		if args := fmt.Sprint(field(obj, "spec.template.spec.containers.0.args")); !strings.Contains(args, "--secret-namespaces=lbregistrar-system,team-a") {
			t.Errorf("args %s, want the release namespace kept", args)
		}
	}
}

// As a subchart, the chart is given its parent's global values, which its
// schema must let through (helm/helm#10392).
func TestChartTakesGlobalValues(t *testing.T) {
	if _, err := renderChart(root, map[string]any{"global": map[string]any{"imageRegistry": "registry.example"}}); err != nil {
		t.Errorf("global values refused: %v", err)
	}
}

// helm lint, strict (warnings fail), passes at the defaults and with every
// value set.
func TestChartLints(t *testing.T) {
	values, err := readValues("testdata/every-value.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for name, values := range map[string]map[string]any{"defaults": nil, "every value": values} {
		lint := action.NewLint()
		lint.Strict = true
		lint.Namespace = releaseNamespace
		result := lint.Run([]string{filepath.Join(root, chartPath)}, values)
		for _, err := range result.Errors {
			t.Errorf("%s: %v", name, err)
		}
		if result.TotalChartsLinted != 1 {
			t.Errorf("%s: %d charts linted", name, result.TotalChartsLinted)
		}
	}
}

// kustomize renders config/<overlay> with kubectl's kustomize, the one
// `kubectl apply -k` runs (bin/kubectl, built by make test-assets).
func kustomize(t *testing.T, overlay string) []object {
	t.Helper()
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		assets = filepath.Join(root, "bin")
	}
	out, err := exec.Command(filepath.Join(assets, "kubectl"), "kustomize", filepath.Join(root, "config", overlay)).Output()
	if err != nil {
		t.Fatalf("kubectl kustomize config/%s (make test-assets builds kubectl): %v", overlay, err)
	}
	objects, err := splitObjects(string(out))
	if err != nil {
		t.Fatal(err)
	}
	return objects
}

// render renders the chart with values (YAML) over its own.
func render(t *testing.T, values string) []object {
	t.Helper()
	var parsed map[string]any
	if err := yaml.Unmarshal([]byte(values), &parsed); err != nil {
		t.Fatal(err)
	}
	manifest, err := renderChart(root, parsed)
	if err != nil {
		t.Fatal(err)
	}
	objects, err := splitObjects(manifest)
	if err != nil {
		t.Fatal(err)
	}
	return objects
}

func byKey(t *testing.T, manifest string) map[string]object {
	t.Helper()
	objects, err := splitObjects(manifest)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]object{}
	for _, obj := range objects {
		if _, dup := m[key(obj)]; dup {
			t.Errorf("%s rendered twice", key(obj))
		}
		m[key(obj)] = obj
	}
	return m
}

func count(objects []object, kind, name string) int {
	n := 0
	for _, obj := range objects {
		if obj["kind"] == kind && field(obj, "metadata.name") == name {
			n++
		}
	}
	return n
}

// dropHelmOnlyMetadata removes helmOnlyMetadata from obj, and its labels
// or annotations altogether when nothing else is left.
func dropHelmOnlyMetadata(obj object) {
	meta, _ := obj["metadata"].(map[string]any)
	for _, part := range []string{"labels", "annotations"} {
		m, _ := meta[part].(map[string]any)
		for k := range m {
			if slices.Contains(helmOnlyMetadata, k) {
				delete(m, k)
			}
		}
		if m != nil && len(m) == 0 {
			delete(meta, part)
		}
	}
}

// field is the value at a dotted path of map keys and list indexes, nil
// where there is none.
func field(obj any, path string) any {
	for part := range strings.SplitSeq(path, ".") {
		switch v := obj.(type) {
		case map[string]any:
			obj = v[part]
		case []any:
			i, err := strconv.Atoi(part)
			if err != nil || i >= len(v) {
				return nil
			}
			obj = v[i]
		default:
			return nil
		}
	}
	return obj
}
