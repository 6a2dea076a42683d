package reconciler_test

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/peppy-ratio/lbregistrar/"

// The flow file calls into at most 8 of the reconciler's packages, no
// package under reconciler/ reaches back up to the flow, and no file of
// code is longer than a newcomer can hold (docs/reconciler.md, "Map").
func TestPackageMap(t *testing.T) {
	if n := len(reconcilerImports(t, "reconciler.go")); n > 8 {
		t.Errorf("reconciler.go imports %d packages under reconciler/, want at most 8: %v", n, reconcilerImports(t, "reconciler.go"))
	}
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if lines := strings.Count(string(src), "\n"); lines > 500 && !strings.Contains(string(src), "Code generated") {
			t.Errorf("%s has %d lines, over 500", path, lines)
		}
		if filepath.Dir(path) == "." {
			return nil
		}
		for _, imp := range reconcilerImports(t, path) {
			if imp == module+"reconciler" {
				t.Errorf("%s imports the flow package", path)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// reconcilerImports lists the packages under reconciler/ a file imports.
func reconcilerImports(t *testing.T, path string) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		if p == module+"reconciler" || strings.HasPrefix(p, module+"reconciler/") {
			out = append(out, p)
		}
	}
	return out
}
