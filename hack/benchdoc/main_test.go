package main

import "testing"

func TestRewriteKeepsTheNotes(t *testing.T) {
	const header = "# Benchmarks\n\nWritten by `make bench` (hack/benchdoc) on 2026-01-02: cpu.\n"
	previous := header + "\n## BenchmarkA\n\nold A\n\n## BenchmarkB\n\nold B\n" + notesHeading + "\nWhat runs showed.\n"
	run := header + "\n## BenchmarkA\n\nnew A\n"
	for _, tc := range []struct {
		name           string
		previous, want string
		merge          bool
	}{
		{"a run", previous, run + notesHeading + "\nWhat runs showed.\n", false},
		{"a merged run", previous, run + "\n## BenchmarkB\n\nKept from an earlier run: `make bench` (hack/benchdoc) on 2026-01-02: cpu.\n\nold B\n" + notesHeading + "\nWhat runs showed.\n", true},
		{"a first run", "", run, true},
		{"no notes yet", header + "\n## BenchmarkA\n\nold A\n", run, false},
	} {
		if got := rewrite(tc.previous, run, tc.merge); got != tc.want {
			t.Errorf("%s: got\n%s\nwant\n%s", tc.name, got, tc.want)
		}
	}
}
