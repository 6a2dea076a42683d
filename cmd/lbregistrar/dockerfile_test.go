package main

import (
	"bufio"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// The image builds what cmd/lbregistrar needs: every package of this module
// it imports lies in a directory the Dockerfile copies, so a new package
// cannot break the image unnoticed.
func TestDockerfileCopiesEveryPackage(t *testing.T) {
	f, err := os.Open("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	copied := map[string]bool{}
	scan := bufio.NewScanner(f)
	for scan.Scan() {
		fields := strings.Fields(scan.Text())
		if len(fields) == 3 && fields[0] == "COPY" && strings.HasSuffix(fields[1], "/") {
			copied[strings.TrimSuffix(fields[1], "/")] = true
		}
	}
	const module = "github.com/peppy-ratio/lbregistrar/"
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		rel, ok := strings.CutPrefix(pkg, module)
		if !ok {
			continue
		}
		if !slices.ContainsFunc(slices.Collect(maps.Keys(copied)), func(dir string) bool { return rel == dir || strings.HasPrefix(rel, dir+"/") }) {
			t.Errorf("cmd/lbregistrar imports %s, but the Dockerfile copies neither %s/ nor a directory above it", pkg, rel)
		}
	}
}
