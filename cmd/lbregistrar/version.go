package main

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version describes the running binary from the build information the Go
// toolchain embeds: the module version (a tag when built with go install,
// "(devel)" from a checkout), the commit and its time, whether the tree had
// local changes, and the Go version.
func version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "lbregistrar (no build information)"
	}
	commit, built, modified := "unknown", "", ""
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
