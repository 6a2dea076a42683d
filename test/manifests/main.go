// Command manifests reads the files that install lbregistrar with the
// libraries that will read them: it renders the Helm chart with Helm's. Its
// own tests compare the chart with config/; the main module's end-to-end
// tests run it to apply the chart to a real API server. It is a module of
// its own so that Helm never enters the main module's dependencies.
//
//	manifests [-root DIR] render-chart [-f values.yaml]   the chart's manifest
package main

import (
	"flag"
	"fmt"
	"os"
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
		return fmt.Errorf("want a command: render-chart")
	}
	command := flag.NewFlagSet(global.Arg(0), flag.ContinueOnError)
	switch global.Arg(0) {
	case "render-chart":
		values := command.String("f", "", "a values file")
		if err := command.Parse(global.Args()[1:]); err != nil {
			return err
		}
		return renderChartCommand(*root, *values)
	default:
		return fmt.Errorf("unknown command %q: want render-chart", global.Arg(0))
	}
}
