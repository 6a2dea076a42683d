package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	release "helm.sh/helm/v4/pkg/release/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
)

// The chart, and the release the tests render it as: the names config/
// uses.
const (
	chartPath        = "charts/lbregistrar"
	releaseName      = "lbregistrar"
	releaseNamespace = "lbregistrar-system"
)

// renderChart renders the chart under root as `helm template` does, into
// releaseNamespace, with values over the chart's own, and returns its
// manifest: YAML documents.
func renderChart(root string, values map[string]any) (string, error) {
	chart, err := loader.Load(filepath.Join(root, chartPath))
	if err != nil {
		return "", err
	}
	install := action.NewInstall(action.NewConfiguration())
	install.DryRunStrategy = action.DryRunClient
	install.ReleaseName = releaseName
	install.Namespace = releaseNamespace
	rendered, err := install.Run(chart, values)
	if err != nil {
		return "", err
	}
	rel, ok := rendered.(*release.Release)
	if !ok {
		return "", fmt.Errorf("helm rendered a %T", rendered)
	}
	return rel.Manifest, nil
}

// readValues reads a values file as helm -f does.
func readValues(file string) (map[string]any, error) {
	values, err := common.ReadValuesFile(file)
	if err != nil {
		return nil, err
	}
	return values.AsMap(), nil
}

// object is one Kubernetes object, as read from YAML.
type object = map[string]any

// splitObjects parses YAML documents into objects, skipping empty ones.
func splitObjects(manifest string) ([]object, error) {
	decoder := yaml.NewYAMLOrJSONDecoder(bytes.NewReader([]byte(manifest)), 4096)
	var objects []object
	for {
		var obj object
		err := decoder.Decode(&obj)
		if errors.Is(err, io.EOF) {
			return objects, nil
		}
		if err != nil {
			return nil, err
		}
		if obj != nil {
			objects = append(objects, obj)
		}
	}
}

// key names an object: kind, namespace and name.
func key(obj object) string {
	meta, _ := obj["metadata"].(map[string]any)
	namespace, _ := meta["namespace"].(string)
	name, _ := meta["name"].(string)
	return fmt.Sprintf("%s %s/%s", obj["kind"], namespace, name)
}

// renderChartCommand is `manifests render-chart [-f values.yaml]`: the
// chart's manifest on stdout, for tests that apply it.
func renderChartCommand(root, valuesFile string) error {
	var values map[string]any
	if valuesFile != "" {
		var err error
		if values, err = readValues(valuesFile); err != nil {
			return err
		}
	}
	manifest, err := renderChart(root, values)
	if err != nil {
		return err
	}
	_, err = os.Stdout.WriteString(manifest)
	return err
}
