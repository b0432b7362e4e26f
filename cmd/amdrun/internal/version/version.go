// Package version is `amdrun version`.
package version

import (
	"encoding/json"
	"fmt"
	"runtime"

	"github.com/amdrun/amdrun/cmd/amdrun/internal/cmdutil"
	"github.com/spf13/cobra"
)

// Info is what `amdrun version --json` prints.
type Info struct {
	Version string `json:"version"`
	Go      string `json:"go"`
	OS      string `json:"os"`
	Arch    string `json:"arch"`
}

// Of returns the Info of this binary, built as version v.
func Of(v string) Info {
	return Info{Version: v, Go: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH}
}

// Line is the version as `amdrun version` and `amdrun --version` both
// print it: "amdrun 1.2.3 (go1.26.0, linux/amd64)".
func (i Info) Line() string {
	return fmt.Sprintf("amdrun %s (%s, %s/%s)", i.Version, i.Go, i.OS, i.Arch)
}

// NewCmdVersion returns `amdrun version`.
func NewCmdVersion(f *cmdutil.Factory) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print amdrun's version (as --version does)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			info := Of(f.Version)
			if asJSON {
				enc := json.NewEncoder(f.IOStreams.Out)
				enc.SetIndent("", "  ")
				return enc.Encode(info)
			}
			_, err := fmt.Fprintln(f.IOStreams.Out, info.Line())
			return err
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print version, go, os and arch as JSON")
	return cmd
}
