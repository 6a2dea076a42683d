package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/common/model"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/prometheus/prometheus/util/annotations"
)

// firingAlertsCommand is `manifests fire-alerts`: it reads a scrape of
// lbregistrar serve's /metrics on stdin, keeps every series at its scraped
// value for duration, scraped every step as Prometheus would, evaluates each
// alert's expression with Prometheus' own query engine at each step, and
// prints the alerts firing at the end (active at every step for at least
// their "for", as Prometheus' rule evaluation has it), one per line with
// their labels and the rule's. So a test shows that an alert fires on the series a
// running controller really exposes.
func firingAlertsCommand(root string, scrape io.Reader, duration, step time.Duration) error {
	groups, err := alertRules(root)
	if err != nil {
		return err
	}
	scraped, err := scrapedSeries(scrape)
	if err != nil {
		return fmt.Errorf("reading the scrape: %w", err)
	}
	start := time.Now()
	end := start.Add(duration)
	steady := steadySeries(scraped, start, end, step)
	engine := promql.NewEngine(promql.EngineOpts{Logger: slog.New(slog.DiscardHandler), MaxSamples: 1e7, Timeout: time.Minute, LookbackDelta: 5 * time.Minute})
	ctx := context.Background()
	type alert struct {
		name, expr  string
		labels      map[string]string
		forDuration time.Duration
		activeAt    map[string]time.Time // by labels, since when it has been active
	}
	var alerts []*alert
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				alerts = append(alerts, &alert{name: r.Alert, expr: r.Expr, labels: r.Labels, forDuration: time.Duration(r.For), activeAt: map[string]time.Time{}})
			}
		}
	}
	for at := start; !at.After(end); at = at.Add(step) {
		for _, a := range alerts {
			q, err := engine.NewInstantQuery(ctx, steady, nil, a.expr, at)
			if err != nil {
				return fmt.Errorf("%s: %w", a.name, err)
			}
			res := q.Exec(ctx)
			vector, err := res.Vector()
			q.Close()
			if err != nil {
				return fmt.Errorf("%s: %w", a.name, err)
			}
			active := map[string]time.Time{}
			for _, sample := range vector {
				b := labels.NewBuilder(sample.Metric).Del(model.MetricNameLabel).Set(labels.AlertName, a.name)
				for k, v := range a.labels {
					b.Set(k, v)
				}
				key := b.Labels().String()
				since, ok := a.activeAt[key]
				if !ok {
					since = at
				}
				active[key] = since
			}
			a.activeAt = active // an alert not active at a step starts over
		}
	}
	var firing []string
	for _, a := range alerts {
		for key, since := range a.activeAt {
			if end.Sub(since) >= a.forDuration {
				firing = append(firing, key)
			}
		}
	}
	slices.Sort(firing)
	fmt.Println(strings.Join(firing, "\n"))
	return nil
}

// steadySeries is a store of the scraped series, each sampled at its scraped
// value every step from start to end.
func steadySeries(scraped []series, start, end time.Time, step time.Duration) storage.Queryable {
	var all []storage.Series
	for _, s := range scraped {
		var samples chunks.SampleSlice
		for at := start; !at.After(end); at = at.Add(step) {
			samples = append(samples, floatSample{t: at.UnixMilli(), f: s.value})
		}
		lset := labels.NewBuilder(labels.FromMap(s.labels)).Set(model.MetricNameLabel, s.name).Labels()
		all = append(all, storage.NewListSeries(lset, samples))
	}
	slices.SortFunc(all, func(a, b storage.Series) int { return labels.Compare(a.Labels(), b.Labels()) })
	return storage.QueryableFunc(func(mint, maxt int64) (storage.Querier, error) {
		return &storage.MockQuerier{SelectMockFunction: func(_ bool, _ *storage.SelectHints, matchers ...*labels.Matcher) storage.SeriesSet {
			var selected []storage.Series
			for _, s := range all {
				if matchAll(s.Labels(), matchers) {
					selected = append(selected, s)
				}
			}
			return &seriesList{list: selected, at: -1}
		}}, nil
	})
}

func matchAll(lset labels.Labels, matchers []*labels.Matcher) bool {
	for _, m := range matchers {
		if !m.Matches(lset.Get(m.Name)) {
			return false
		}
	}
	return true
}

// seriesList is a storage.SeriesSet of a sorted list.
type seriesList struct {
	list []storage.Series
	at   int
}

func (l *seriesList) Next() bool                        { l.at++; return l.at < len(l.list) }
func (l *seriesList) At() storage.Series                { return l.list[l.at] }
func (l *seriesList) Err() error                        { return nil }
func (l *seriesList) Warnings() annotations.Annotations { return nil }

// floatSample is one float sample of a steady series.
type floatSample struct {
	t int64
	f float64
}

func (s floatSample) T() int64                      { return s.t }
func (s floatSample) ST() int64                     { return 0 }
func (s floatSample) F() float64                    { return s.f }
func (s floatSample) H() *histogram.Histogram       { return nil }
func (s floatSample) FH() *histogram.FloatHistogram { return nil }
func (s floatSample) Type() chunkenc.ValueType      { return chunkenc.ValFloat }
func (s floatSample) Copy() chunks.Sample           { return s }
