package reconciler_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The reasons of conditions and Events are the constants of
// api/v1beta1/reasons.go, where users and docs find them: no code under
// reconciler/ declares one of its own or writes one as a literal. (The
// oci package's Reason* constants are retry classes, a metric label.)
func TestReasonsLiveWithTheAPITypes(t *testing.T) {
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		literal := func(e ast.Expr) bool {
			lit, ok := e.(*ast.BasicLit)
			return ok && lit.Kind == token.STRING && lit.Value != `""`
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.ValueSpec:
				for _, name := range n.Names {
					if strings.HasPrefix(strings.ToLower(name.Name), "reason") && filepath.Dir(path) != "oci" {
						t.Errorf("%s: declares reason %s; reasons are declared in api/v1beta1/reasons.go", fset.Position(name.Pos()), name.Name)
					}
				}
			case *ast.KeyValueExpr:
				if key, ok := n.Key.(*ast.Ident); ok && key.Name == "Reason" && literal(n.Value) {
					t.Errorf("%s: a literal reason; use a constant of api/v1beta1/reasons.go", fset.Position(n.Pos()))
				}
			case *ast.CallExpr:
				sel, ok := n.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				// The reason is Eventf's fourth argument and SetCondition's.
				if (sel.Sel.Name == "Eventf" || sel.Sel.Name == "SetCondition") && len(n.Args) > 3 && literal(n.Args[3]) {
					t.Errorf("%s: a literal reason in %s; use a constant of api/v1beta1/reasons.go", fset.Position(n.Pos()), sel.Sel.Name)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
