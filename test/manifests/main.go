// Command manifests reads the files that install and monitor lbregistrar
// with the libraries that will read them: it renders the Helm chart with
// Helm's, and lists the metrics the alerts and the Grafana dashboard name
// with Prometheus' parsers, and checks a scrape of lbregistrar serve against
// them. Its own tests compare the chart with config/ and check the
// monitoring files; the main module's end-to-end tests run it to apply the
// chart to a real API server and to check a running serve's /metrics. It is
// a module of its own so that Helm and Prometheus never enter the main
// module's dependencies.
//
//	manifests [-root DIR] render-chart [-f values.yaml]           the chart's manifest
//	manifests [-root DIR] check-scrape < scrape                   fails naming what the scrape lacks
//	manifests [-root DIR] fire-alerts [-duration 2h] < scrape     the alerts that fire if the scrape stays as it is
package main

import (
	"flag"
	"fmt"
	"os"
	"time"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "manifests:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	global := flag.NewFlagSet("manifests", flag.ContinueOnError)
	root := global.String("root", "../..", "the repository root")
	if err := global.Parse(args); err != nil {
		return err
	}
	if global.NArg() == 0 {
		return fmt.Errorf("want a command: render-chart, check-scrape or fire-alerts")
	}
	command := flag.NewFlagSet(global.Arg(0), flag.ContinueOnError)
	switch global.Arg(0) {
	case "render-chart":
		values := command.String("f", "", "a values file")
		if err := command.Parse(global.Args()[1:]); err != nil {
			return err
		}
		return renderChartCommand(*root, *values)
	case "check-scrape":
		if err := command.Parse(global.Args()[1:]); err != nil {
			return err
		}
		return checkScrapeCommand(*root, os.Stdin)
	case "fire-alerts":
		duration := command.Duration("duration", 2*time.Hour, "how long the scraped values stay as scraped")
		step := command.Duration("step", 30*time.Second, "the scrape and evaluation interval")
		if err := command.Parse(global.Args()[1:]); err != nil {
			return err
		}
		return firingAlertsCommand(*root, os.Stdin, *duration, *step)
	default:
		return fmt.Errorf("unknown command %q: want render-chart, check-scrape or fire-alerts", global.Arg(0))
	}
}
