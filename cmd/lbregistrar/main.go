// Command lbregistrar is the whole product in one binary: the webhooks and
// reconciler (serve) and the offline tools (validate, convert, migrate).
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

func main() {
	if err := newRootCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

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
	return root
}
