package main

import (
	"bytes"
	"os"
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

// In an image the build context has no .git: the Dockerfile's VERSION and
// COMMIT, which make image passes from git, are what version prints.
func TestVersionOfAnImageBuild(t *testing.T) {
	defer func(v, c string) { buildVersion, buildCommit = v, c }(buildVersion, buildCommit)
	buildVersion, buildCommit = "v0.1.0-3-gabc", "abc123"
	if got := version(); !strings.HasPrefix(got, "lbregistrar v0.1.0-3-gabc, commit abc123, go") {
		t.Errorf("version() = %q, want the version and commit the build was given", got)
	}
	dockerfile, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	makefile, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"-X main.buildVersion=${VERSION}", "-X main.buildCommit=${COMMIT}"} {
		if !bytes.Contains(dockerfile, []byte(want)) {
			t.Errorf("the Dockerfile does not build with %s", want)
		}
	}
	if !bytes.Contains(makefile, []byte("--build-arg VERSION='$(VERSION)' --build-arg COMMIT='$(COMMIT)'")) {
		t.Error("make image does not pass VERSION and COMMIT")
	}
}
