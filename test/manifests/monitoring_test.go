package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The alerts and every dashboard query parse with Prometheus' own rule file
// and PromQL parsers (unknown fields, bad expressions and bad annotation
// templates fail), and each selects its metric by name. Which names serve
// exports is checked against a running serve by the main module's
// TestMonitoringNamesExportedMetrics, from the list metricSelectors makes.
func TestMonitoringQueriesParse(t *testing.T) {
	selectors, err := metricSelectors(root)
	if err != nil {
		t.Fatal(err)
	}
	where := map[string]bool{}
	for _, s := range selectors {
		where[s.Where] = true
	}
	rules, err := alertRules(root)
	if err != nil {
		t.Fatal(err)
	}
	d, err := readDashboard(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(rules.Groups) == 0 || len(d.allPanels()) == 0 {
		t.Fatalf("%d rule groups, %d panels", len(rules.Groups), len(d.allPanels()))
	}
	// Every alert and every graph has a query that selects something.
	for _, group := range rules.Groups {
		for _, rule := range group.Rules {
			if !where[prometheusRuleFile+": alert "+rule.Alert] {
				t.Errorf("alert %s selects nothing", rule.Alert)
			}
		}
	}
	for _, p := range d.allPanels() {
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
	}
}

// Each alert says how bad it is and what happened, and docs/operations.md,
// which explains them, names every one.
func TestAlertsAreDescribedAndDocumented(t *testing.T) {
	rules, err := alertRules(root)
	if err != nil {
		t.Fatal(err)
	}
	docs, err := os.ReadFile(filepath.Join(root, "docs/operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, group := range rules.Groups {
		for _, rule := range group.Rules {
			if rule.Alert == "" {
				t.Errorf("group %s: a rule that is not an alert: %s", group.Name, rule.Expr)
				continue
			}
			switch rule.Labels["severity"] {
			case "warning", "critical":
			default:
				t.Errorf("%s: severity %q, want warning or critical", rule.Alert, rule.Labels["severity"])
			}
			for _, annotation := range []string{"summary", "description"} {
				if rule.Annotations[annotation] == "" {
					t.Errorf("%s: no %s", rule.Alert, annotation)
				}
			}
			if !strings.Contains(string(docs), "`"+rule.Alert+"`") {
				t.Errorf("docs/operations.md does not name %s", rule.Alert)
			}
		}
	}
}

// The dashboard imports into any Grafana: every query goes to the data
// source the importer picks, through the variable ${datasource}.
func TestDashboardUsesTheChosenDataSource(t *testing.T) {
	d, err := readDashboard(root)
	if err != nil {
		t.Fatal(err)
	}
	vars := d.Templating.List
	if len(vars) != 1 || vars[0] != (variable{Name: "datasource", Type: "datasource", Query: "prometheus"}) {
		t.Errorf("templating: %+v, want the one Prometheus data source variable", vars)
	}
	if d.Title == "" {
		t.Error("the dashboard has no title")
	}
	want := dataSource{Type: "prometheus", UID: "${datasource}"}
	for _, p := range d.allPanels() {
		if p.Type == "row" {
			continue
		}
		sources := []*dataSource{p.Datasource}
		for _, target := range p.Targets {
			sources = append(sources, target.Datasource)
		}
		for _, s := range sources {
			if s == nil || *s != want {
				t.Errorf("panel %q queries %+v, want %+v", p.Title, s, want)
			}
		}
	}
}

// A selector is satisfied by a series of its name whose labels match its
// equality matchers and have the labels its other matchers name; histogram
// series are found by the names Prometheus stores them under.
func TestUnsatisfiedSelectors(t *testing.T) {
	scraped, err := scrapedSeries(strings.NewReader(`# TYPE lbregistrar_work_request_duration_seconds histogram
lbregistrar_work_request_duration_seconds_bucket{kind="loadbalancer",status="succeeded",le="0.05"} 1
lbregistrar_work_request_duration_seconds_bucket{kind="loadbalancer",status="succeeded",le="+Inf"} 1
lbregistrar_work_request_duration_seconds_sum{kind="loadbalancer",status="succeeded"} 0.01
lbregistrar_work_request_duration_seconds_count{kind="loadbalancer",status="succeeded"} 1
# TYPE leader_election_master_status gauge
leader_election_master_status{name="lbregistrar.nodes.peppy-ratio.dev"} 1
`))
	if err != nil {
		t.Fatal(err)
	}
	selector := func(query string) metricSelector {
		selectors, err := selectorsOf(query, query)
		if err != nil || len(selectors) != 1 {
			t.Fatalf("%s: %v %v", query, selectors, err)
		}
		return selectors[0]
	}
	for query, satisfied := range map[string]bool{
		`lbregistrar_work_request_duration_seconds_bucket`:                        true,
		`lbregistrar_work_request_duration_seconds_count{status!="succeeded"}`:    true,
		`lbregistrar_work_request_duration_seconds_count{kind="loadbalancer"}`:    true,
		`leader_election_master_status{name="lbregistrar.nodes.peppy-ratio.dev"}`: true,
		`lbregistrar_work_request_duration_seconds`:                               false,
		`lbregistrar_work_request_duration_seconds_count{kind="nlb"}`:             false,
		`lbregistrar_work_request_duration_seconds_count{state=~"failed"}`:        false,
		`leader_election_master_status{name="lbregistrar"}`:                       false,
		`lbregistrar_oci_retries_total`:                                           false,
	} {
		problems := unsatisfied([]metricSelector{selector(query)}, scraped)
		if got := len(problems) == 0; got != satisfied {
			t.Errorf("%s satisfied: %v, want %v (%v)", query, got, satisfied, problems)
		}
	}
}

// The ServiceMonitor of config/prometheus finds the replicas' metrics port:
// it selects the metrics Service and names its port, which targets the
// Deployment's metrics container port (where serve's --metrics-addr
// listens), on the pods the Service selects. (The chart's objects are the
// same, by TestChartInstallsWhatKustomizeDoes.)
func TestServiceMonitorFindsTheMetricsPort(t *testing.T) {
	objects := map[string]object{}
	for _, overlay := range []string{"default", "prometheus"} {
		for _, obj := range kustomize(t, overlay) {
			objects[key(obj)] = obj
		}
	}
	monitor := objects["ServiceMonitor lbregistrar-system/lbregistrar"]
	deployment := objects["Deployment lbregistrar-system/lbregistrar"]
	if monitor == nil || deployment == nil {
		t.Fatal("no ServiceMonitor or no Deployment")
	}
	var services []object
	for _, obj := range objects {
		if obj["kind"] == "Service" && matches(field(monitor, "spec.selector.matchLabels"), field(obj, "metadata.labels")) {
			services = append(services, obj)
		}
	}
	if len(services) != 1 {
		t.Fatalf("the ServiceMonitor selects %d Services, want the metrics one", len(services))
	}
	service := services[0]
	if !matches(field(service, "spec.selector"), field(deployment, "spec.template.metadata.labels")) {
		t.Errorf("%s does not select the Deployment's pods", key(service))
	}
	portName := field(monitor, "spec.endpoints.0.port")
	var targetPort any
	for _, p := range field(service, "spec.ports").([]any) {
		if field(p, "name") == portName {
			targetPort = field(p, "targetPort")
		}
	}
	var containerPort any
	for _, p := range field(deployment, "spec.template.spec.containers.0.ports").([]any) {
		if field(p, "name") == targetPort {
			containerPort = field(p, "containerPort")
		}
	}
	args := field(deployment, "spec.template.spec.containers.0.args").([]any)
	if containerPort == nil || !slices.Contains(args, any(fmt.Sprintf("--metrics-addr=:%v", containerPort))) {
		t.Errorf("port %v of %s targets %v, container port %v; serve's arguments: %v", portName, key(service), targetPort, containerPort, args)
	}
}

// matches says whether labels has every pair of selector.
func matches(selector, labels any) bool {
	s, _ := selector.(map[string]any)
	l, _ := labels.(map[string]any)
	if len(s) == 0 {
		return false
	}
	for k, v := range s {
		if l[k] != v {
			return false
		}
	}
	return true
}
