// Package version is `amdrun version`.
package version

import (
	"fmt"
	"runtime"

	"github.com/amdrun/amdrun/cmd/amdrun/internal/cmdutil"
	"github.com/spf13/cobra"
)

// NewCmdVersion returns `amdrun version`.
func NewCmdVersion(f *cmdutil.Factory) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print amdrun's version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			fmt.Fprintf(f.IOStreams.Out, "amdrun %s (%s, %s/%s)\n", f.Version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return nil
		},
	}
}
