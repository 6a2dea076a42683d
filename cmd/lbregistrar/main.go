// Command lbregistrar is the whole product in one binary: the webhooks and
// reconciler (serve) and the offline tools (validate, convert, migrate).
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

func main() {
	root := &cobra.Command{
		Use:           "lbregistrar",
		Short:         "Keep Kubernetes nodes registered in OCI load balancer backend sets",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newServeCommand())
	root.AddCommand(newMigrateStorageCommand())
	root.AddCommand(newValidateCommand())
	root.AddCommand(newConvertCommand())
	root.AddCommand(newMigrateCommand())
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}
