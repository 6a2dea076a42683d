package v1beta1_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strconv"
	"strings"
	"testing"
)

// Every reason lbregistrar writes is explained to its users: each
// constant of reasons.go is named in docs/operations.md.
func TestReasonsAreDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	f, err := parser.ParseFile(token.NewFileSet(), "reasons.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	ast.Inspect(f, func(node ast.Node) bool {
		spec, ok := node.(*ast.ValueSpec)
		if !ok {
			return true
		}
		for _, v := range spec.Values {
			reason, _ := strconv.Unquote(v.(*ast.BasicLit).Value)
			n++
			if !strings.Contains(string(doc), "`"+reason+"`") {
				t.Errorf("reason %s is not in docs/operations.md", reason)
			}
		}
		return false
	})
	if n < 30 {
		t.Fatalf("read %d reasons from reasons.go, want all of them", n)
	}
}
