package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"sigs.k8s.io/yaml"
)

// The monitoring files, under the repository root.
const (
	prometheusRuleFile = "config/prometheus/prometheusrule.yaml"
	dashboardFile      = "config/prometheus/grafana-dashboard.json"
)

// A metricSelector is one vector selector in an alert or a dashboard query:
// the metric it names and its matchers on other labels.
type metricSelector struct {
	Where    string // the alert or panel
	Metric   string
	Matchers []matcher
}

type matcher struct {
	Label string
	Op    string // =, !=, =~ or !~
	Value string
}

// promQL is Prometheus' own parser with its default options, as a server
// runs it.
var promQL = parser.NewParser(parser.Options{})

// alertRules parses the PrometheusRule's groups with Prometheus' rule file
// parser, which rejects unknown fields and checks every expression and
// annotation template.
func alertRules(root string) (*rulefmt.RuleGroups, error) {
	data, err := os.ReadFile(filepath.Join(root, prometheusRuleFile))
	if err != nil {
		return nil, err
	}
	var rule struct {
		Spec json.RawMessage `json:"spec"`
	}
	if err := yaml.Unmarshal(data, &rule); err != nil {
		return nil, fmt.Errorf("%s: %w", prometheusRuleFile, err)
	}
	groups, err := yaml.JSONToYAML(rule.Spec)
	if err != nil {
		return nil, err
	}
	parsed, errs := rulefmt.Parse(groups, false, model.LegacyValidation, promQL, slog.New(slog.DiscardHandler))
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s: %w", prometheusRuleFile, errors.Join(errs...))
	}
	return parsed, nil
}

// dashboard is the part of a Grafana dashboard that says what it queries.
type dashboard struct {
	Title      string `json:"title"`
	Templating struct {
		List []variable `json:"list"`
	} `json:"templating"`
	Panels []panel `json:"panels"`
}

type variable struct {
	Name  string `json:"name"`
	Type  string `json:"type"`
	Query string `json:"query"`
}

type panel struct {
	Title      string      `json:"title"`
	Type       string      `json:"type"`
	Datasource *dataSource `json:"datasource"`
	Targets    []target    `json:"targets"`
	Panels     []panel     `json:"panels"` // those of a collapsed row
}

type target struct {
	Expr       string      `json:"expr"`
	Datasource *dataSource `json:"datasource"`
}

type dataSource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

func readDashboard(root string) (dashboard, error) {
	var d dashboard
	data, err := os.ReadFile(filepath.Join(root, dashboardFile))
	if err != nil {
		return d, err
	}
	if err := json.Unmarshal(data, &d); err != nil {
		return d, fmt.Errorf("%s: %w", dashboardFile, err)
	}
	return d, nil
}

// allPanels is the dashboard's panels, those inside rows included.
func (d dashboard) allPanels() []panel {
	var all []panel
	var add func([]panel)
	add = func(panels []panel) {
		for _, p := range panels {
			all = append(all, p)
			add(p.Panels)
		}
	}
	add(d.Panels)
	return all
}

// grafanaIntervals stands for the interval variables Grafana replaces in a
// query before Prometheus reads it.
var grafanaIntervals = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h")

// metricSelectors is every vector selector of the alerts and of the
// dashboard's queries, each parsed by Prometheus' own parsers. It fails on
// anything they reject, and on a query that selects no metric by its name.
func metricSelectors(root string) ([]metricSelector, error) {
	rules, err := alertRules(root)
	if err != nil {
		return nil, err
	}
	var all []metricSelector
	var errs []error
	add := func(where, query string) {
		selectors, err := selectorsOf(where, query)
		all = append(all, selectors...)
		errs = append(errs, err)
	}
	for _, group := range rules.Groups {
		for _, rule := range group.Rules {
			add(fmt.Sprintf("%s: alert %s", prometheusRuleFile, rule.Alert), rule.Expr)
		}
	}
	d, err := readDashboard(root)
	if err != nil {
		return nil, err
	}
	for _, p := range d.allPanels() {
		for _, t := range p.Targets {
			add(fmt.Sprintf("%s: panel %q", dashboardFile, p.Title), grafanaIntervals.Replace(t.Expr))
		}
	}
	return all, errors.Join(errs...)
}

func selectorsOf(where, query string) ([]metricSelector, error) {
	expr, err := promQL.ParseExpr(query)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	var selectors []metricSelector
	for _, matchers := range parser.ExtractSelectors(expr) {
		s := metricSelector{Where: where}
		for _, m := range matchers {
			if m.Name == model.MetricNameLabel && m.Type == labels.MatchEqual {
				s.Metric = m.Value
				continue
			}
			s.Matchers = append(s.Matchers, matcher{Label: m.Name, Op: m.Type.String(), Value: m.Value})
		}
		if s.Metric == "" {
			return nil, fmt.Errorf("%s: %s selects no metric by its name", where, query)
		}
		selectors = append(selectors, s)
	}
	if len(selectors) == 0 {
		return nil, fmt.Errorf("%s: %s selects no metric", where, query)
	}
	return selectors, nil
}

// A series is one line of a scrape: a metric name and its labels.
type series struct {
	name   string
	labels map[string]string
	value  float64
}

// scrapedSeries reads a Prometheus text exposition into its series,
// histograms and summaries as Prometheus stores them (_bucket, _sum,
// _count).
func scrapedSeries(exposition io.Reader) ([]series, error) {
	parser := expfmt.NewTextParser(model.LegacyValidation)
	families, err := parser.TextToMetricFamilies(exposition)
	if err != nil {
		return nil, err
	}
	var all []series
	for name, family := range families {
		for _, m := range family.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			add := func(suffix string, value float64, extra ...string) {
				s := series{name: name + suffix, labels: maps.Clone(labels), value: value}
				for i := 0; i+1 < len(extra); i += 2 {
					s.labels[extra[i]] = extra[i+1]
				}
				all = append(all, s)
			}
			switch family.GetType() {
			case dto.MetricType_HISTOGRAM:
				h := m.GetHistogram()
				for _, b := range h.GetBucket() {
					add("_bucket", float64(b.GetCumulativeCount()), "le", strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64))
				}
				// The text parser keeps the +Inf bucket when the scrape has it.
				if !slices.ContainsFunc(h.GetBucket(), func(b *dto.Bucket) bool { return math.IsInf(b.GetUpperBound(), 1) }) {
					add("_bucket", float64(h.GetSampleCount()), "le", "+Inf")
				}
				add("_sum", h.GetSampleSum())
				add("_count", float64(h.GetSampleCount()))
			case dto.MetricType_SUMMARY:
				sum := m.GetSummary()
				for _, q := range sum.GetQuantile() {
					add("", q.GetValue(), "quantile", strconv.FormatFloat(q.GetQuantile(), 'g', -1, 64))
				}
				add("_sum", sum.GetSampleSum())
				add("_count", float64(sum.GetSampleCount()))
			case dto.MetricType_COUNTER:
				add("", m.GetCounter().GetValue())
			case dto.MetricType_GAUGE:
				add("", m.GetGauge().GetValue())
			default:
				add("", m.GetUntyped().GetValue())
			}
		}
	}
	return all, nil
}

// unsatisfied names each selector that no scraped series satisfies: one
// with its metric name whose labels match every equality matcher, and have
// every label the other matchers name. (Those may rightly match nothing in
// a healthy process, as result=~"400|401|403" does, but a label missing
// altogether is a mistake.)
func unsatisfied(selectors []metricSelector, scraped []series) []string {
	var problems []string
	for _, sel := range selectors {
		if !slices.ContainsFunc(scraped, sel.satisfiedBy) {
			problems = append(problems, fmt.Sprintf("%s: no series %s%s", sel.Where, sel.Metric, sel.matchersText()))
		}
	}
	return problems
}

func (sel metricSelector) satisfiedBy(s series) bool {
	if s.name != sel.Metric {
		return false
	}
	for _, m := range sel.Matchers {
		value, ok := s.labels[m.Label]
		if !ok || m.Op == labels.MatchEqual.String() && value != m.Value {
			return false
		}
	}
	return true
}

func (sel metricSelector) matchersText() string {
	if len(sel.Matchers) == 0 {
		return ""
	}
	var parts []string
	for _, m := range sel.Matchers {
		parts = append(parts, fmt.Sprintf("%s%s%q", m.Label, m.Op, m.Value))
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// checkScrapeCommand is `manifests check-scrape`: it reads a scrape of
// lbregistrar serve's /metrics on stdin and fails naming every alert or
// dashboard selector the scrape does not satisfy.
func checkScrapeCommand(root string, scrape io.Reader) error {
	selectors, err := metricSelectors(root)
	if err != nil {
		return err
	}
	scraped, err := scrapedSeries(scrape)
	if err != nil {
		return fmt.Errorf("reading the scrape: %w", err)
	}
	if problems := unsatisfied(selectors, scraped); len(problems) > 0 {
		return fmt.Errorf("series the alerts or the dashboard select are not exported:\n%s", strings.Join(problems, "\n"))
	}
	fmt.Printf("%d selectors, each satisfied by a series of the %d scraped\n", len(selectors), len(scraped))
	return nil
}
