package main

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// buildVersion and buildCommit are set by the image build (the Dockerfile's
// VERSION and COMMIT, which make image passes from git): the build context
// has no .git, so the toolchain has no VCS information to embed there.
var buildVersion, buildCommit string

// version describes the running binary from the build information the Go
// toolchain embeds: the module version (a tag when built with go install,
// "(devel)" from a checkout), the commit and its time, whether the tree had
// local changes, and the Go version; or, in an image, the version and
// commit its build was given.
func version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "lbregistrar (no build information)"
	}
	commit, built, modified := "unknown", "", ""
	if buildCommit != "" {
		return fmt.Sprintf("lbregistrar %s, commit %s, %s", buildVersion, buildCommit, info.GoVersion)
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			commit = s.Value
		case "vcs.time":
			built = " " + s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = "+modified"
			}
		}
	}
	return fmt.Sprintf("lbregistrar %s, commit %s%s%s, %s", info.Main.Version, commit, modified, built, info.GoVersion)
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit and Go version of this binary",
		Args:  cobra.NoArgs,
		Run:   func(cmd *cobra.Command, _ []string) { fmt.Fprintln(cmd.OutOrStdout(), version()) },
	}
}
