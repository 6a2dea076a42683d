package main

import (
	"bytes"
	"runtime"
	"strings"
	"testing"
)

// lbregistrar version and lbregistrar --version print the same line: the
// binary's version, commit and Go version.
func TestVersion(t *testing.T) {
	var outputs []string
	for _, args := range [][]string{{"version"}, {"--version"}} {
		root := newRootCommand()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetArgs(args)
		if err := root.Execute(); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		outputs = append(outputs, out.String())
	}
	if outputs[0] != outputs[1] {
		t.Errorf("version %q and --version %q differ", outputs[0], outputs[1])
	}
	if line := outputs[0]; !strings.HasPrefix(line, "lbregistrar ") || !strings.Contains(line, ", commit ") || !strings.HasSuffix(line, runtime.Version()+"\n") {
		t.Errorf("version line %q lacks the version, the commit or the Go version", line)
	}
}
