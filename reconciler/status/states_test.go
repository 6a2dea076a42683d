package status_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/reconciler/status"
)

// docs/operations.md ("Conditions") gives each reason's state as the code
// does: every row of a table with a state column names the state
// status.States has for its reason, and every reason of the table is in a
// row.
func TestStatesAreDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("^\\| (?:True|False|Unknown) \\| `([A-Za-z]+)` \\| ([A-Za-z—]+) \\|")
	documented := map[string]bool{}
	stateColumn := false
	for line := range strings.SplitSeq(string(doc), "\n") {
		if strings.HasPrefix(line, "| status | reason |") {
			stateColumn = strings.HasPrefix(line, "| status | reason | state |")
			continue
		}
		m := row.FindStringSubmatch(line)
		if m == nil || !stateColumn {
			continue
		}
		reason, state := m[1], m[2]
		documented[reason] = true
		want, ok := status.States[reason]
		switch {
		case !ok && state != "—":
			t.Errorf("docs: %s is %s, but status.States lacks it", reason, state)
		case ok && string(want) != state:
			t.Errorf("docs: %s is %s, status.States says %s", reason, state, want)
		}
	}
	for reason := range status.States {
		if !documented[reason] {
			t.Errorf("status.States has %s, which no table of docs/operations.md with a state column names", reason)
		}
	}
}

// Every reason a condition the table governs can carry is in the table:
// each constant of api/v1beta1/reasons.go but those of the pods' readiness
// gate and of Events alone, and the two that are not Ready's.
func TestEveryReasonHasAState(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "../../api/v1beta1/reasons.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	notRead := map[string]bool{v1beta1.ReasonAsExpected: true, v1beta1.ReasonSuspended: true}
	for _, decl := range f.Decls {
		gen, ok := decl.(*ast.GenDecl)
		if !ok || gen.Tok != token.CONST {
			continue
		}
		doc := gen.Doc.Text()
		if strings.Contains(doc, "readiness gate") || strings.Contains(doc, "Events only") {
			continue
		}
		for _, spec := range gen.Specs {
			for _, v := range spec.(*ast.ValueSpec).Values {
				reason, _ := strconv.Unquote(v.(*ast.BasicLit).Value)
				if _, ok := status.States[reason]; !ok && !notRead[reason] {
					t.Errorf("reason %s has no state in status.States", reason)
				}
			}
		}
	}
}
