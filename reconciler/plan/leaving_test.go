package plan

import (
	"os"
	"strings"
	"testing"
)

// The leaving policy in code and docs/reconciler.md's table "When a
// backend leaves" have the same rows, in the same order: the reason, then
// whether the backend is drained first and for which period.
func TestPolicyIsTheDocsTable(t *testing.T) {
	doc, err := os.ReadFile("../../docs/reconciler.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, found := strings.Cut(string(doc), "\n### When a backend leaves\n")
	if !found {
		t.Fatal(`docs/reconciler.md has no section "When a backend leaves"`)
	}
	var rows [][]string
	for _, line := range strings.Split(section, "\n") {
		if strings.HasPrefix(line, "#") {
			break
		}
		if strings.HasPrefix(line, "| ") && !strings.HasPrefix(line, "| a backend stops") {
			rows = append(rows, strings.Split(strings.Trim(line, "| "), " | "))
		}
	}
	drained := map[Fate]string{DrainedThenRemoved: "yes", Replaced: "no", Orphaned: "orphaned"}
	period := map[Period]string{NoPeriod: "—", NodeDrainPeriod: "`--node-drain-period`", DrainPeriod: "`--drain-period`"}
	if len(rows) != len(Policy) {
		t.Fatalf("the docs' table has %d rows, Policy %d", len(rows), len(Policy))
	}
	for i, d := range Policy {
		row := rows[i]
		if row[0] != d.Because || !strings.HasPrefix(row[1], drained[d.Fate]) || !strings.HasPrefix(row[2], period[d.For]) {
			t.Errorf("row %d: docs %q, code %q, drained first %q, for %q", i+1, row[:3], d.Because, drained[d.Fate], period[d.For])
		}
	}
}
