package reconciler_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/peppy-ratio/lbregistrar/"

// Limits on how many packages under reconciler/ the flow reaches, and on
// the files of the package itself.
const (
	flowFileLimit = 8  // imported by reconciler.go
	stepsLimit    = 10 // imported, all told, by the flow and its steps (readiness: what a flight found, for the gates)
	rootLimit     = 12 // files of code in package reconciler: the flow and the wiring
)

// wiring are the files of package reconciler that set the controller up or
// serve beside it, and that no reconcile runs; they may import any package.
// Every other non-test file of the package, a new one too, is the flow or one
// of its steps, and counts towards stepsLimit.
var wiring = []string{
	"setup.go",   // builds the reconciler, its controller, watches, runnables and the manager's cache options
	"options.go", // flags, and the options of the packages below
	"watches.go", // maps watch events to reconcile requests
	"planner.go", // lbregistrar plan's entry: decides as the flow does, writes nothing
}

// The flow file calls into at most flowFileLimit of the reconciler's
// packages, and the flow with all its steps, whichever file of the package
// holds them, into at most stepsLimit; the package has at most rootLimit
// files of code; no package under reconciler/ reaches back up to the flow,
// and no file of code is longer than a newcomer can hold (docs/reconciler.md,
// "Map").
func TestPackageMap(t *testing.T) {
	if imps := reconcilerImports(t, "reconciler.go"); len(imps) > flowFileLimit {
		t.Errorf("reconciler.go imports %d packages under reconciler/, want at most %d: %v", len(imps), flowFileLimit, imps)
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	if code := slices.DeleteFunc(slices.Clone(files), func(f string) bool { return strings.HasSuffix(f, "_test.go") }); len(code) > rootLimit {
		t.Errorf("package reconciler has %d files of code, want at most %d (the rest belongs in packages named for what they do): %v", len(code), rootLimit, code)
	}
	for _, name := range wiring {
		if !slices.Contains(files, name) {
			t.Errorf("wiring file %s is gone: take it off the list", name)
		}
	}
	steps := map[string][]string{} // package -> the files importing it
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") || slices.Contains(wiring, file) {
			continue
		}
		for _, imp := range reconcilerImports(t, file) {
			pkg := strings.TrimPrefix(imp, module)
			steps[pkg] = append(steps[pkg], file)
		}
	}
	if len(steps) > stepsLimit {
		t.Errorf("the flow and its steps (package reconciler but %v) import %d packages under reconciler/, want at most %d: %v",
			wiring, len(steps), stepsLimit, steps)
	}
	err = filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
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

// Function length limits: a reader holds a function of the pure core
// (computing the desired state, the plan, the decision, the gates) whole,
// and any other of the reconciler's in one screenful.
const (
	coreFunctionLimit = 60
	functionLimit     = 80
)

var core = []string{"desired", "plan", "decide", "readiness"}

// No function of the reconciler's code is longer than its limit.
func TestFunctionLengths(t *testing.T) {
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		limit := functionLimit
		if slices.Contains(core, strings.Split(path, string(filepath.Separator))[0]) {
			limit = coreFunctionLimit
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			if lines := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1; lines > limit {
				t.Errorf("%s: %s has %d lines, over %d", path, fn.Name.Name, lines, limit)
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

// vocabulary is the reconciler's private vocabulary: the words its code and
// docs use in a sense of their own, one sense each.
var vocabulary = []string{
	"ownership record", "target", "entry", "vouch", "intent", "lane", "turn", "park", "wake", "flight",
	"scope", "job", "hold", "claimant", "holder", "lost", "protected", "leaving", "retire", "orphaned", "takes",
	"drain", "class", "refusal", "ending", "verdict", "gate", "waiting pod", "settle", "seen", "stand", "blocked",
}

// docs/reconciler.md's "Words" defines every word of the vocabulary, and
// nothing else.
func TestWordsDefineTheVocabulary(t *testing.T) {
	doc, err := os.ReadFile("../docs/reconciler.md")
	if err != nil {
		t.Fatal(err)
	}
	_, words, _ := strings.Cut(string(doc), "\n## Words\n")
	words, _, _ = strings.Cut(words, "\n## ")
	var defined []string
	for line := range strings.SplitSeq(words, "\n") {
		if cells := strings.Split(line, " | "); strings.HasPrefix(line, "| ") && len(cells) > 1 && cells[0] != "| word" && !strings.HasPrefix(line, "|---") {
			defined = append(defined, strings.Split(strings.TrimPrefix(cells[0], "| "), ", ")...)
		}
	}
	slices.Sort(defined)
	want := slices.Sorted(slices.Values(vocabulary))
	if !slices.Equal(defined, want) {
		t.Errorf("docs/reconciler.md defines %q, the vocabulary is %q", defined, want)
	}
}
