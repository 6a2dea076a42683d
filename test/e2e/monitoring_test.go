package e2e

import (
	"crypto/tls"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/test/kube"
	"github.com/peppy-ratio/lbregistrar/test/ociemu"
)

// Every series an alert of config/prometheus or a panel of its Grafana
// dashboard selects is one lbregistrar serve exports, with the label values
// selected, so none of them waits forever on a metric that never comes.
// serve runs as its Deployment does (as its service account, leader
// elected, metrics over HTTPS to authorized callers) against the OCI
// emulator; it registers a resource through a write OCI first refuses with
// 409 (so it retries), and admission refuses a second claim of the same
// backend set; three more are Stalled, Degraded and Suspended. Then /metrics is scraped as the ServiceMonitor of
// config/prometheus scrapes it (the chart's is the same), with the token of
// a service account bound to lbregistrar-metrics-reader, and test/manifests
// matches the scrape against the alerts and the dashboard, read with
// Prometheus' own parsers.
func TestMonitoringSelectsExportedSeries(t *testing.T) {
	t.Parallel()
	c, emu := clusterWithWorkload(t, 0)
	ctx := testContext(t)
	manifest := apiKeyFor(t, c, emu, classicIngressRegistrar)
	emu.AddFault(ociemu.Fault{Operation: "UpdateBackendSet", Status: http.StatusConflict, Times: 1})

	kubeconfig, err := c.ServiceAccountKubeconfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	serve := newServeProcess()
	serve.SecureMetrics = true
	serve.startInstalled(t, c, kubeconfig, nil, "--leader-elect", "--webhook-host=127.0.0.1", "--secret-namespaces="+kube.Namespace,
		"--oci-loadbalancer-endpoint="+emu.URL(), "--oci-networkloadbalancer-endpoint="+emu.URL(), "--oci-core-endpoint="+emu.URL())
	serve.waitReady(t)
	waitLeaseTaken(t, ctx, c)

	kubectl(t, c, manifest, "apply", "-f", "-")
	waitAllReady(t, c, 1, 2*time.Minute)
	twin := strings.Replace(manifest, "name: legit", "name: legit-twin", 1)
	if _, stderr, err := c.Kubectl(ctx, twin, "apply", "-f", "-"); err == nil {
		t.Fatal("a second claim of the backend set was admitted")
	} else {
		t.Logf("the second claim refused: %s", stderr)
	}

	// A resource each that is Stalled, Degraded and Suspended: the alerts on
	// state select those conditions True.
	key := manifest[strings.Index(manifest, "  apiKey:"):]
	resource := func(name, rest string) string {
		return "apiVersion: nodes.peppy-ratio.dev/v1beta1\nkind: LBRegistrar\nmetadata: {name: " + name + "}\nspec:\n  loadBalancerId: " + classicIngress + "\n" + rest + key + "---\n"
	}
	kubectl(t, c, resource("stalled", "  services:\n  - {nodePort: 30081, backendSetName: absent, weight: 1}\n")+
		resource("degraded", "  services:\n  - {name: absent, namespace: "+kube.Namespace+", port: 80, backendSetName: edge, weight: 1}\n")+
		resource("paused", "  suspend: true\n  services:\n  - {nodePort: 30082, backendSetName: edge-http, weight: 1}\n"), "apply", "-f", "-")
	waitCondition(t, c, "stalled", v1beta1.ConditionStalled, metav1.ConditionTrue, v1beta1.ReasonBackendSetNotFound)
	waitCondition(t, c, "degraded", v1beta1.ConditionDegraded, metav1.ConditionTrue, v1beta1.ReasonServiceNotFound)
	waitCondition(t, c, "paused", v1beta1.ConditionSuspended, metav1.ConditionTrue, v1beta1.ReasonSuspended)

	kubectl(t, c, "", "create", "namespace", "monitoring")
	kubectl(t, c, "", "-n", "monitoring", "create", "serviceaccount", "prometheus")
	kubectl(t, c, "", "create", "clusterrolebinding", "prometheus-lbregistrar-metrics",
		"--clusterrole=lbregistrar-metrics-reader", "--serviceaccount=monitoring:prometheus")
	token, _ := kubectl(t, c, "", "-n", "monitoring", "create", "token", "prometheus")
	scrape := scrapeAsServiceMonitor(t, c.Root, serve.MetricsAddr, strings.TrimSpace(token))
	t.Log(runManifests(t, scrape, "check-scrape"))
}

// scrapeAsServiceMonitor gets the metrics of the serve listening at
// metricsAddr as the endpoint of config/prometheus/servicemonitor.yaml says,
// with token as the Prometheus pod's own.
func scrapeAsServiceMonitor(t *testing.T, root, metricsAddr, token string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "config/prometheus/servicemonitor.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var monitor struct {
		Spec struct {
			Endpoints []struct {
				Port, Path, Scheme string
				BearerTokenFile    string `json:"bearerTokenFile"`
				TLSConfig          struct {
					InsecureSkipVerify bool `json:"insecureSkipVerify"`
				} `json:"tlsConfig"`
			}
		}
	}
	if err := yaml.Unmarshal(data, &monitor); err != nil {
		t.Fatal(err)
	}
	if len(monitor.Spec.Endpoints) != 1 {
		t.Fatalf("the ServiceMonitor has %d endpoints, want 1", len(monitor.Spec.Endpoints))
	}
	endpoint := monitor.Spec.Endpoints[0]
	// The Service's port of that name is the Deployment's metrics port,
	// which serve listens on at --metrics-addr (here, metricsAddr).
	if endpoint.Port != "metrics" || endpoint.BearerTokenFile == "" {
		t.Fatalf("the ServiceMonitor scrapes port %q with token file %q, want metrics and the pod's token", endpoint.Port, endpoint.BearerTokenFile)
	}
	client := &http.Client{
		Timeout:   30 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: endpoint.TLSConfig.InsecureSkipVerify}},
	}
	req, err := http.NewRequestWithContext(testContext(t), http.MethodGet, endpoint.Scheme+"://"+metricsAddr+endpoint.Path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scraping as the ServiceMonitor: %s\n%s", resp.Status, body)
	}
	return string(body)
}
