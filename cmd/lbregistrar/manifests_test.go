package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/spf13/cobra"

	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/api/validation"
)

// repo is the repository root, from this package's directory.
const repo = "../.."

func testdata(name string) string { return filepath.Join(repo, "test", "testdata", "cli", name) }

// run executes one subcommand as main does and returns what it printed.
func run(t *testing.T, cmd *cobra.Command, stdin string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd.SetArgs(args)
	cmd.SetIn(strings.NewReader(stdin))
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SilenceUsage = true
	err = cmd.Execute()
	return out.String(), errOut.String(), err
}

func TestSplitDocumentsKeepsLines(t *testing.T) {
	docs := splitDocuments([]byte("a: 1\n---\nb: 2\nc: 3\n--- # next\n\nd: 4\n---\n"))
	var lines []int
	for _, d := range docs {
		lines = append(lines, d.line)
	}
	if want := []int{1, 3, 6, 9}; !slices.Equal(lines, want) {
		t.Errorf("document lines = %v, want %v", lines, want)
	}
	if string(docs[1].data) != "b: 2\nc: 3\n" {
		t.Errorf("second document = %q", docs[1].data)
	}
}

func TestReadManifests(t *testing.T) {
	set, err := readManifests([]string{testdata("malformed.yaml"), testdata("list.yaml"), testdata("unknown-field.json")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if set.skipped != 1 {
		t.Errorf("skipped = %d, want the ConfigMap", set.skipped)
	}
	if len(set.manifests) != 2 || set.manifests[0].name() != "listed-a" || set.manifests[1].alpha == nil {
		t.Errorf("manifests = %+v, want listed-a (v1beta1) and listed-b (v1alpha1) from the List", set.manifests)
	}
	if len(set.errs) != 2 {
		t.Fatalf("errors = %v, want two", set.errs)
	}
	for i, want := range []string{
		testdata("malformed.yaml") + ":12: invalid YAML: did not find expected ',' or ']'",
		testdata("unknown-field.json") + `:1: invalid LBRegistrar: unknown field "spec.loadBalancerID"`,
	} {
		if got := set.errs[i].Error(); got != want {
			t.Errorf("error %d = %q, want %q", i, got, want)
		}
	}
}

func TestReadManifestsErrors(t *testing.T) {
	for name, input := range map[string]string{
		"no kind":         "metadata: {name: x}\n",
		"unknown version": "apiVersion: nodes.peppy-ratio.dev/v2\nkind: LBRegistrar\n",
		"not an object":   "- a\n- b\n",
		"wrong type":      "apiVersion: nodes.peppy-ratio.dev/v1beta1\nkind: LBRegistrar\nspec:\n  services: 3\n",
		"tab indentation": "apiVersion: v1\nkind: LBRegistrar\nspec:\n\tfoo: 1\n",
	} {
		t.Run(name, func(t *testing.T) {
			set, err := readManifests([]string{"-"}, strings.NewReader(input))
			if err != nil {
				t.Fatal(err)
			}
			if len(set.errs) != 1 || !strings.HasPrefix(set.errs[0].Error(), "-:") {
				t.Errorf("errors = %v, want one naming standard input and a line", set.errs)
			}
		})
	}
	if _, err := readManifests([]string{filepath.Join(t.TempDir(), "missing.yaml")}, nil); !os.IsNotExist(err) {
		t.Errorf("missing file: err = %v", err)
	}
}

// Mistakes that used to pass unnoticed: each is an error naming the
// document (and the List item), and nothing of it is read.
func TestReadManifestsRefusesAmbiguousDocuments(t *testing.T) {
	const beta = "apiVersion: nodes.peppy-ratio.dev/v1beta1\n"
	tests := []struct {
		name, input string
		want        []string
	}{{
		name:  "misspelled kind in the group",
		input: "apiVersion: v1\nkind: ConfigMap\n---\n" + beta + "kind: LBRegistrarz\n",
		want:  []string{"-:4: unknown kind LBRegistrarz in nodes.peppy-ratio.dev: this group has LBRegistrar and LBRegistrarList"},
	}, {
		name:  "misspelled list kind in the group",
		input: beta + "kind: LBRegistrarsList\nitems: []\n",
		want:  []string{"-:1: unknown kind LBRegistrarsList in nodes.peppy-ratio.dev: this group has LBRegistrar and LBRegistrarList"},
	}, {
		name:  "key given twice in YAML, twice over",
		input: "apiVersion: v1\nkind: ConfigMap\n---\n" + beta + "kind: LBRegistrar\nmetadata:\n  name: a\n  name: b\nspec:\n  loadBalancerId: x\n  loadBalancerId: y\n",
		want: []string{
			`-:8: invalid YAML: key "name" already set in map`,
			`-:11: invalid YAML: key "loadBalancerId" already set in map`,
		},
	}, {
		name:  "key given twice in JSON",
		input: `{"apiVersion": "nodes.peppy-ratio.dev/v1beta1", "kind": "LBRegistrar",` + "\n" + `"spec": {"loadBalancerId": "x", "loadBalancerId": "y"}}`,
		want:  []string{`-:2: invalid YAML: key "loadBalancerId" already set in map`},
	}, {
		name: "List items",
		input: "apiVersion: v1\nkind: List\nitems:\n" +
			"- {apiVersion: v1, kind: ConfigMap}\n" +
			"- {apiVersion: nodes.peppy-ratio.dev/v1beta1, kind: LBRegistrar, spec: {loadBalancerID: x}}\n" +
			"- {apiVersion: nodes.peppy-ratio.dev/v1beta1, kind: LBRegistrarList, items: [{kind: LBRegistrar}]}\n",
		want: []string{
			`-:1: items[1]: invalid LBRegistrar: unknown field "spec.loadBalancerID"`,
			"-:1: items[2].items[0]: not a Kubernetes object: apiVersion and kind are required",
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set, err := readManifests([]string{"-"}, strings.NewReader(tt.input))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range set.errs {
				got = append(got, e.Error())
			}
			if !slices.Equal(got, tt.want) || len(set.manifests) != 0 {
				t.Errorf("errors:\n%s\nwant:\n%s\nmanifests: %d, want none", strings.Join(got, "\n"), strings.Join(tt.want, "\n"), len(set.manifests))
			}
		})
	}
}

// endless is standard input that never ends; past twice the cap it fails
// the read, so that a reader without the cap fails instead of filling memory.
type endless struct{ read int }

func (e *endless) Read(p []byte) (int, error) {
	if e.read > 2*maxFileBytes {
		return 0, errors.New("read on past the cap")
	}
	clear(p)
	e.read += len(p)
	return len(p), nil
}

func TestReadManifestsCapsEachFile(t *testing.T) {
	stdin := &endless{}
	_, err := readManifests([]string{"-"}, stdin)
	if err == nil || err.Error() != "standard input: more than 4 MiB, the most one file may contain: split it" {
		t.Errorf("endless standard input: err = %v", err)
	}
	if stdin.read > maxFileBytes+1 {
		t.Errorf("%d bytes read from standard input, want the cap (%d) and no more", stdin.read, maxFileBytes)
	}

	dir := t.TempDir()
	atCap, overCap := filepath.Join(dir, "at-cap.yaml"), filepath.Join(dir, "over-cap.yaml")
	comment := append([]byte("#"), bytes.Repeat([]byte(" "), maxFileBytes-2)...)
	comment = append(comment, '\n')
	if err := os.WriteFile(atCap, comment, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(overCap, append(comment, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := readManifests([]string{atCap}, nil); err != nil {
		t.Errorf("a file of exactly %d bytes: %v", maxFileBytes, err)
	}
	if _, err := readManifests([]string{dir}, nil); err == nil || !strings.HasPrefix(err.Error(), overCap+": more than 4 MiB") {
		t.Errorf("a file over the cap: err = %v, want one naming it", err)
	}
}

// A document with more services items than an LBRegistrar may have is
// refused before conversion: convert would otherwise spend memory and time
// in proportion to whatever the file contains.
func TestReadManifestsCapsServices(t *testing.T) {
	var doc strings.Builder
	doc.WriteString("apiVersion: v1\nkind: ConfigMap\n---\napiVersion: nodes.peppy-ratio.dev/v1alpha1\nkind: LBRegistrar\nspec:\n  services:\n")
	for i := range validation.MaxTargets + 1 {
		fmt.Fprintf(&doc, "  - {name: web, namespace: default, port: %d}\n", i+1)
	}
	set, err := readManifests([]string{"-"}, strings.NewReader(doc.String()))
	if err != nil {
		t.Fatal(err)
	}
	want := "-:4: invalid LBRegistrar: spec.services: Too many: 257: must have at most 256 items"
	if len(set.manifests) != 0 || len(set.errs) != 1 || set.errs[0].Error() != want {
		t.Errorf("manifests %d, errors %v; want the error %q", len(set.manifests), set.errs, want)
	}
}

// Only regular files are read: a FIFO in a directory would block the read
// until something writes to it, and a device may never end.
func TestReadManifestsReadsRegularFilesOnly(t *testing.T) {
	if _, err := readManifests([]string{os.DevNull}, nil); err == nil || err.Error() != os.DevNull+": not a regular file; pass a pipe or device on standard input with -f -" {
		t.Errorf("%s: err = %v", os.DevNull, err)
	}

	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// A writer that is waiting for a reader: had the FIFO been opened, it
	// would have been read to its end rather than blocked on.
	written := make(chan error, 1)
	go func() {
		f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err == nil {
			_, err = f.WriteString("apiVersion: v1\nkind: ConfigMap\n")
			err = errors.Join(err, f.Close())
		}
		written <- err
	}()
	t.Cleanup(func() {
		// Release the writer if nothing else opened the FIFO.
		if r, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
			<-written //nolint:errcheck // the writer's error: only that it is released counts here
			r.Close()
		}
	})

	_, err := readManifests([]string{dir}, nil)
	if err == nil || !strings.HasPrefix(err.Error(), fifo+": not a regular file") {
		t.Errorf("a FIFO in a directory: err = %v, want one naming it", err)
	}
}

// FuzzManifests feeds arbitrary files to the decoder and the checks behind
// validate, convert and migrate: none may panic, and every document is
// either an object or an error with a line inside the input.
func FuzzManifests(f *testing.F) {
	for _, dir := range []string{filepath.Join(repo, "config", "samples"), filepath.Join(repo, "test", "testdata", "cli")} {
		files, err := manifestFiles(dir)
		if err != nil {
			f.Fatal(err)
		}
		for _, file := range files {
			data, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
		}
	}
	f.Add([]byte("---\n---\n"))
	f.Add([]byte("apiVersion: nodes.peppy-ratio.dev/v1alpha1\nkind: LBRegistrar\nspec: {services: [{}], service: {}}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		set, err := readManifests([]string{"-"}, bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		lines := bytes.Count(data, []byte("\n")) + 1
		for _, e := range set.errs {
			if e.Line < 1 || e.Line > lines {
				t.Errorf("error on line %d of a %d-line input: %v", e.Line, lines, e)
			}
		}
		validateManifests(set, nil, false)
		for i := range set.manifests {
			convertManifest(&set.manifests[i], "v1alpha1", false)
			convertManifest(&set.manifests[i], "v1beta1", false)
		}
		hubs := make([]v1beta1.LBRegistrar, 0, len(set.manifests))
		for i := range set.manifests {
			hubs = append(hubs, *set.manifests[i].toHub())
		}
		migrate(hubs)
	})
}
