package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/peppy-ratio/lbregistrar/api/defaulting"
	"github.com/peppy-ratio/lbregistrar/api/v1alpha1"
	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/api/validation"
)

// position is where a document is: its file ("-" for standard input), the
// line it starts on and, for an object inside a List, which item it is.
type position struct {
	Source string `json:"source"`
	Line   int    `json:"line"`
	Item   string `json:"item,omitempty"`
}

// where is the position as messages show it: file:line, then the item.
func (p position) where() string {
	if p.Item == "" {
		return fmt.Sprintf("%s:%d", p.Source, p.Line)
	}
	return fmt.Sprintf("%s:%d: %s", p.Source, p.Line, p.Item)
}

// manifest is one LBRegistrar read from a file, in the version it was written.
// Exactly one of alpha and hub is set.
type manifest struct {
	position
	alpha *v1alpha1.LBRegistrar
	hub   *v1beta1.LBRegistrar
}

func (m *manifest) name() string {
	if m.alpha != nil {
		return m.alpha.Name
	}
	return m.hub.Name
}

func (m *manifest) apiVersion() string {
	if m.alpha != nil {
		return v1alpha1.GroupVersion.String()
	}
	return v1beta1.GroupVersion.String()
}

// toHub is the manifest as v1beta1, through the conversion every reader uses.
func (m *manifest) toHub() *v1beta1.LBRegistrar {
	if m.hub != nil {
		return m.hub
	}
	hub := &v1beta1.LBRegistrar{}
	v1alpha1.ToHub(m.alpha, hub)
	return hub
}

// parseError is a document that could not be read, with where it is.
type parseError struct {
	position
	err error
}

func (e *parseError) Error() string { return e.where() + ": " + e.err.Error() }

// manifestSet is what a set of -f arguments contains: the LBRegistrars, the
// documents that could not be read, and how many other kinds were skipped.
type manifestSet struct {
	manifests []manifest
	errs      []*parseError
	skipped   int
}

// maxFileBytes caps what is read from one file or from standard input: more
// than any one object the API server accepts (3 MiB per request), with room
// for a few, while the YAML parser's worst case on it (about 150 bytes of
// memory per byte read) stays within a few seconds and about 600 MB. An
// endless stream is cut off instead of filling memory.
const maxFileBytes = 4 << 20

// readManifests reads every -f argument: a regular file, a directory (its
// .yaml, .yml and .json files, recursively, in name order) or "-" for stdin.
// Each file may contain several YAML documents, and Lists are expanded. A
// document that cannot be read is recorded with its file and line and the
// rest is still read; only a file or directory that cannot be read, is not a
// regular file, or is larger than maxFileBytes is an error.
func readManifests(args []string, stdin io.Reader) (*manifestSet, error) {
	set := &manifestSet{}
	for _, arg := range args {
		if arg == "-" {
			data, err := readCapped(stdin, "standard input")
			if err != nil {
				return nil, err
			}
			set.add("-", data)
			continue
		}
		files, err := manifestFiles(arg)
		if err != nil {
			return nil, err
		}
		for _, file := range files {
			data, err := readFile(file)
			if err != nil {
				return nil, err
			}
			set.add(file, data)
		}
	}
	return set, nil
}

func readFile(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readCapped(f, name)
}

// readCapped reads r to its end, or fails once it reads more than maxFileBytes.
func readCapped(r io.Reader, name string) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	if len(data) > maxFileBytes {
		return nil, fmt.Errorf("%s: more than %d MiB, the most one file may contain: split it", name, maxFileBytes>>20)
	}
	return data, nil
}

// manifestFiles lists the files path stands for. Only regular files are
// read: opening a FIFO blocks until something writes to it, and a device
// such as /dev/zero never ends.
func manifestFiles(path string) ([]string, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		if err := checkRegular(path, info); err != nil {
			return nil, err
		}
		return []string{path}, nil
	}
	var files []string
	err = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		switch strings.ToLower(filepath.Ext(p)) {
		case ".yaml", ".yml", ".json":
			info, err := os.Stat(p) // through a symbolic link, as reading goes
			if err != nil {
				return err
			}
			if err := checkRegular(p, info); err != nil {
				return err
			}
			files = append(files, p)
		}
		return nil
	})
	slices.Sort(files)
	return files, err
}

func checkRegular(path string, info fs.FileInfo) error {
	if !info.Mode().IsRegular() {
		return fmt.Errorf("%s: not a regular file; pass a pipe or device on standard input with -f -", path)
	}
	return nil
}

// add decodes every document of one file into the set.
func (s *manifestSet) add(source string, data []byte) {
	for _, doc := range splitDocuments(data) {
		s.addDocument(position{Source: source, Line: doc.line}, nil, doc.data)
	}
}

// addDocument decodes the document at pos; item is its path in the List it
// came from, nil for a document of its own.
func (s *manifestSet) addDocument(pos position, item *field.Path, data []byte) {
	if item != nil {
		pos.Item = item.String()
	}
	fail := func(err error) { s.errs = append(s.errs, &parseError{position: pos, err: err}) }
	// Strict, so that a key given twice is an error rather than one of its
	// values silently winning.
	raw, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		found := yamlErrorLines(err)
		if len(found) == 0 {
			fail(fmt.Errorf("invalid YAML: %w", err))
			return
		}
		// The YAML parser counts lines from the document's start; report
		// the line in the file. An error at the end of the stream is put on
		// the last line.
		lines := bytes.Count(data, []byte("\n"))
		for _, e := range found {
			at := pos
			at.Line += max(min(e.line, lines), 1) - 1
			s.errs = append(s.errs, &parseError{position: at, err: fmt.Errorf("invalid YAML: %s", e.msg)})
		}
		return
	}
	if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return // an empty document
	}
	var meta metav1.TypeMeta
	if err := json.Unmarshal(raw, &meta); err != nil {
		fail(fmt.Errorf("not a Kubernetes object: %w", err))
		return
	}
	group := v1beta1.GroupVersion.Group
	ours := meta.GroupVersionKind().Group == group
	switch {
	case meta.Kind == "List" || ours && meta.Kind == "LBRegistrarList":
		var list struct {
			Items []json.RawMessage `json:"items"`
		}
		if err := json.Unmarshal(raw, &list); err != nil {
			fail(fmt.Errorf("reading %s: %w", meta.Kind, err))
			return
		}
		items := field.NewPath("items")
		if item != nil {
			items = item.Child("items")
		}
		for i, data := range list.Items {
			s.addDocument(pos, items.Index(i), data)
		}
	case meta.Kind == "" || meta.APIVersion == "":
		fail(fmt.Errorf("not a Kubernetes object: apiVersion and kind are required"))
	case !ours:
		s.skipped++
	case meta.Kind != "LBRegistrar":
		// Likely a misspelling: skipping it would pass a manifest the API server refuses.
		fail(fmt.Errorf("unknown kind %s in %s: this group has LBRegistrar and LBRegistrarList", meta.Kind, group))
	case meta.APIVersion == v1alpha1.GroupVersion.String():
		obj := &v1alpha1.LBRegistrar{}
		if err := decodeLBRegistrar(raw, v1alpha1.GroupVersion.Version, obj); err != nil {
			fail(err)
			return
		}
		s.manifests = append(s.manifests, manifest{position: pos, alpha: obj})
	case meta.APIVersion == v1beta1.GroupVersion.String():
		obj := &v1beta1.LBRegistrar{}
		if err := decodeLBRegistrar(raw, v1beta1.GroupVersion.Version, obj); err != nil {
			fail(err)
			return
		}
		s.manifests = append(s.manifests, manifest{position: pos, hub: obj})
	default:
		fail(fmt.Errorf("unknown LBRegistrar version %s: use %s or %s", meta.APIVersion, v1alpha1.GroupVersion, v1beta1.GroupVersion))
	}
}

// decodeLBRegistrar decodes an LBRegistrar of version like the API server
// with strict field validation: field names are case-sensitive, unknown or
// duplicate fields are errors, and what the file leaves out gets the CRD's
// defaults (package defaulting). A services list longer than any
// LBRegistrar may have is refused before its items are decoded, so that
// what convert and migrate go on to do stays small.
func decodeLBRegistrar(raw []byte, version string, into any) error {
	var count struct {
		Spec struct {
			Services []struct{} `json:"services"`
		} `json:"spec"`
	}
	// A services value that is not a list is left to the strict decoding.
	if kjson.UnmarshalCaseSensitivePreserveInts(raw, &count) == nil {
		if errs := validation.ValidateTargetCount(len(count.Spec.Services), field.NewPath("spec", "services")); len(errs) > 0 {
			return fmt.Errorf("invalid LBRegistrar: %w", errs.ToAggregate())
		}
	}
	raw, err := defaulting.Default(raw, version)
	if err != nil {
		return fmt.Errorf("invalid LBRegistrar: %w", err)
	}
	strict, err := kjson.UnmarshalStrict(raw, into)
	if err == nil {
		err = errors.Join(strict...)
	}
	if err != nil {
		return fmt.Errorf("invalid LBRegistrar: %w", err)
	}
	return nil
}

// yamlLinePattern matches each problem a YAML parse error names: one for a
// syntax error, one per line for the errors found while decoding (such as a
// key given twice).
var yamlLinePattern = regexp.MustCompile(`(?m)^(?:error converting YAML to JSON: )?(?:yaml: |\s+)line (\d+): (.*)$`)

// yamlError is one problem of a YAML parse error, on a line of the document.
type yamlError struct {
	line int
	msg  string
}

func yamlErrorLines(err error) []yamlError {
	var found []yamlError
	for _, m := range yamlLinePattern.FindAllStringSubmatch(err.Error(), -1) {
		if line, convErr := strconv.Atoi(m[1]); convErr == nil {
			found = append(found, yamlError{line: line, msg: m[2]})
		}
	}
	return found
}

// document is one YAML document and the file line it starts on.
type document struct {
	line int
	data []byte
}

// splitDocuments splits a YAML stream on "---" lines, keeping where each
// document starts so errors can name the line in the file.
func splitDocuments(data []byte) []document {
	var docs []document
	var cur bytes.Buffer
	start, n := 1, 0
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), len(data)+1)
	for sc.Scan() {
		n++
		text := sc.Bytes()
		if isDocumentSeparator(text) {
			docs = append(docs, document{line: start, data: bytes.Clone(cur.Bytes())})
			cur.Reset()
			start = n + 1
			continue
		}
		cur.Write(text)
		cur.WriteByte('\n')
	}
	return append(docs, document{line: start, data: cur.Bytes()})
}

func isDocumentSeparator(line []byte) bool {
	if !bytes.HasPrefix(line, []byte("---")) {
		return false
	}
	rest := bytes.TrimSpace(line[3:])
	return len(rest) == 0 || rest[0] == '#'
}
