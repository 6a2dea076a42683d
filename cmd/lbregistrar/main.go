// Command lbregistrar is the whole product in one binary: the webhooks and
// reconciler (serve) and the offline tools (validate, convert, migrate).
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

func main() {
	if err := newRootCommand().Execute(); err != nil {
		var status exitStatus
		if errors.As(err, &status) {
			os.Exit(int(status))
		}
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

// exitStatus ends the command with that status and nothing more said
// (plan --detailed-exitcode's 2).
type exitStatus int

func (s exitStatus) Error() string { return fmt.Sprintf("exit status %d", int(s)) }

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "lbregistrar",
		Short:         "Keep Kubernetes nodes registered in OCI load balancer backend sets",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version(),
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.AddCommand(newVersionCommand())
	root.AddCommand(newServeCommand())
	root.AddCommand(newMigrateStorageCommand())
	root.AddCommand(newValidateCommand())
	root.AddCommand(newConvertCommand())
	root.AddCommand(newMigrateCommand())
	root.AddCommand(newPlanCommand())
	return root
}
