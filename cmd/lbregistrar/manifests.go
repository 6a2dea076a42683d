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
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/peppy-ratio/lbregistrar/api/v1alpha1"
	"github.com/peppy-ratio/lbregistrar/api/v1beta1"
	"github.com/peppy-ratio/lbregistrar/conversion"
)

// manifest is one LBRegistrar read from a file, in the version it was written.
// Exactly one of alpha and hub is set.
type manifest struct {
	source string // file name, or "-" for standard input
	line   int    // first line of the document in source
	alpha  *v1alpha1.LBRegistrar
	hub    *v1beta1.LBRegistrar
}

func (m *manifest) position() string { return fmt.Sprintf("%s:%d", m.source, m.line) }

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
	conversion.ToHub(m.alpha, hub)
	return hub
}

// parseError is a document that could not be read, with where it is.
type parseError struct {
	source string
	line   int
	err    error
}

func (e *parseError) Error() string { return fmt.Sprintf("%s:%d: %v", e.source, e.line, e.err) }

// manifestSet is what a set of -f arguments holds: the LBRegistrars, the
// documents that could not be read, and how many other kinds were skipped.
type manifestSet struct {
	manifests []manifest
	errs      []*parseError
	skipped   int
}

// readManifests reads every -f argument: a file, a directory (its .yaml,
// .yml and .json files, recursively, in name order) or "-" for stdin. Each
// file may hold several YAML documents, and Lists are expanded. A document
// that cannot be read is recorded with its file and line and the rest is
// still read; only an unreadable file or directory is an error.
func readManifests(args []string, stdin io.Reader) (*manifestSet, error) {
	set := &manifestSet{}
	for _, arg := range args {
		if arg == "-" {
			data, err := io.ReadAll(stdin)
			if err != nil {
				return nil, fmt.Errorf("reading standard input: %w", err)
			}
			set.add("-", data)
			continue
		}
		files, err := manifestFiles(arg)
		if err != nil {
			return nil, err
		}
		for _, file := range files {
			data, err := os.ReadFile(file)
			if err != nil {
				return nil, err
			}
			set.add(file, data)
		}
	}
	return set, nil
}

func manifestFiles(path string) ([]string, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		return []string{path}, nil
	}
	var files []string
	err = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch strings.ToLower(filepath.Ext(p)) {
		case ".yaml", ".yml", ".json":
			if !d.IsDir() {
				files = append(files, p)
			}
		}
		return nil
	})
	slices.Sort(files)
	return files, err
}

// add decodes every document of one file into the set.
func (s *manifestSet) add(source string, data []byte) {
	for _, doc := range splitDocuments(data) {
		s.addDocument(source, doc.line, doc.data)
	}
}

func (s *manifestSet) addDocument(source string, line int, data []byte) {
	fail := func(err error) { s.errs = append(s.errs, &parseError{source: source, line: line, err: err}) }
	raw, err := yaml.YAMLToJSON(data)
	if err != nil {
		// The YAML parser counts lines from the document's start; report
		// the line in the file, and point at the document when it has none.
		if l, msg, ok := yamlErrorLine(err); ok {
			// An error at the end of the stream is put on the last line.
			l = max(min(l, bytes.Count(data, []byte("\n"))), 1)
			s.errs = append(s.errs, &parseError{source: source, line: line + l - 1, err: fmt.Errorf("invalid YAML: %s", msg)})
			return
		}
		fail(fmt.Errorf("invalid YAML: %w", err))
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
	switch {
	case meta.Kind == "List" || strings.HasSuffix(meta.Kind, "List") && meta.GroupVersionKind().Group == v1beta1.GroupVersion.Group:
		var list struct {
			Items []json.RawMessage `json:"items"`
		}
		if err := json.Unmarshal(raw, &list); err != nil {
			fail(fmt.Errorf("reading %s: %w", meta.Kind, err))
			return
		}
		for _, item := range list.Items {
			s.addDocument(source, line, item)
		}
	case meta.GroupVersionKind().Group != v1beta1.GroupVersion.Group || meta.Kind != "LBRegistrar":
		if meta.Kind == "" || meta.APIVersion == "" {
			fail(fmt.Errorf("not a Kubernetes object: apiVersion and kind are required"))
			return
		}
		s.skipped++
	case meta.APIVersion == v1alpha1.GroupVersion.String():
		obj := &v1alpha1.LBRegistrar{}
		if err := strictJSON(raw, obj); err != nil {
			fail(err)
			return
		}
		s.manifests = append(s.manifests, manifest{source: source, line: line, alpha: obj})
	case meta.APIVersion == v1beta1.GroupVersion.String():
		obj := &v1beta1.LBRegistrar{}
		if err := strictJSON(raw, obj); err != nil {
			fail(err)
			return
		}
		s.manifests = append(s.manifests, manifest{source: source, line: line, hub: obj})
	default:
		fail(fmt.Errorf("unknown LBRegistrar version %s: use %s or %s", meta.APIVersion, v1alpha1.GroupVersion, v1beta1.GroupVersion))
	}
}

// strictJSON decodes like the API server with strict field validation:
// field names are case-sensitive, and unknown or duplicate fields are errors.
func strictJSON(raw []byte, into any) error {
	strict, err := kjson.UnmarshalStrict(raw, into)
	if err == nil {
		err = errors.Join(strict...)
	}
	if err != nil {
		return fmt.Errorf("invalid LBRegistrar: %w", err)
	}
	return nil
}

var yamlLinePattern = regexp.MustCompile(`^(?:error converting YAML to JSON: )?yaml: line (\d+): (.*)$`)

// yamlErrorLine extracts the line a YAML parse error names.
func yamlErrorLine(err error) (int, string, bool) {
	m := yamlLinePattern.FindStringSubmatch(err.Error())
	if m == nil {
		return 0, "", false
	}
	line, convErr := strconv.Atoi(m[1])
	return line, m[2], convErr == nil
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
