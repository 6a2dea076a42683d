package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
)

// prometheusOperator is the prometheus-operator module whose CRDs the tests
// install; the kinds config/prometheus and the Helm chart use
// (monitoring.coreos.com/v1 ServiceMonitor and PrometheusRule) are stable
// across its releases.
const prometheusOperator = "github.com/prometheus-operator/prometheus-operator@v0.85.0"

// InstallPrometheusOperatorCRDs installs prometheus-operator's
// ServiceMonitor and PrometheusRule CustomResourceDefinitions, from its
// module as the go command fetches it, so that the monitoring objects in
// config/ and the Helm chart can be applied. Only the CRDs: no operator, no
// Prometheus.
func (c *Cluster) InstallPrometheusOperatorCRDs(ctx context.Context) error {
	// Run outside the project's module, so that its go.sum is left alone.
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", prometheusOperator)
	cmd.Dir = c.dir
	out, err := cmd.Output()
	var module struct{ Dir, Error string }
	_ = json.Unmarshal(out, &module) // when the download fails, Error says why
	if err != nil || module.Dir == "" {
		return fmt.Errorf("downloading %s: %w %s", prometheusOperator, err, module.Error)
	}
	dir := filepath.Join(module.Dir, "example", "prometheus-operator-crd")
	var files []string
	for _, kind := range []string{"servicemonitors", "prometheusrules"} {
		files = append(files, "-f", filepath.Join(dir, "monitoring.coreos.com_"+kind+".yaml"))
	}
	if _, stderr, err := c.Kubectl(ctx, "", append([]string{"apply", "--server-side"}, files...)...); err != nil {
		return fmt.Errorf("installing prometheus-operator CRDs from %s: %w: %s", dir, err, stderr)
	}
	_, stderr, err := c.Kubectl(ctx, "", append([]string{"wait", "--for=condition=Established", "--timeout=60s"}, files...)...)
	if err != nil {
		return fmt.Errorf("waiting for prometheus-operator CRDs: %w: %s", err, stderr)
	}
	return nil
}
