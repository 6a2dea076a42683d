// Command testtimes reads `go test -json` on stdin and prints where the
// suite's time goes: each package's wall time, and the slowest tests (top
// level, with their subtests' time in them), so that a slow suite is cut
// where it is slow. make test-times runs it.
package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
)

// event is the part of a test2json event this reads.
type event struct {
	Action  string
	Package string
	Test    string
	Elapsed float64
}

type timing struct {
	name    string
	seconds float64
}

func main() {
	top := flag.Int("top", 20, "how many of the slowest tests to print")
	flag.Parse()
	var packages, tests []timing
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e event
		if json.Unmarshal(sc.Bytes(), &e) != nil || (e.Action != "pass" && e.Action != "fail") {
			continue
		}
		short := strings.TrimPrefix(e.Package, "github.com/peppy-ratio/lbregistrar/")
		switch {
		case e.Test == "":
			packages = append(packages, timing{short, e.Elapsed})
		case !strings.Contains(e.Test, "/"):
			tests = append(tests, timing{short + " " + e.Test, e.Elapsed})
		}
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "testtimes:", err)
		os.Exit(1)
	}
	slowestFirst := func(a, b timing) int { return cmp.Compare(b.seconds, a.seconds) }
	slices.SortFunc(packages, slowestFirst)
	slices.SortFunc(tests, slowestFirst)
	fmt.Println("packages, wall time:")
	for _, p := range packages {
		fmt.Printf("  %8.1f s  %s\n", p.seconds, p.name)
	}
	fmt.Printf("the %d slowest tests:\n", min(*top, len(tests)))
	for _, t := range tests[:min(*top, len(tests))] {
		fmt.Printf("  %8.1f s  %s\n", t.seconds, t.name)
	}
}
