// Package version is `amdrun version`.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"

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

// FromBuild is the version a binary reports: stamped, when the build set
// one (-ldflags "-X main.version=..." in make build and make dist);
// otherwise the module version the go command recorded (go install
// github.com/amdrun/amdrun/cmd/amdrun@v1.2.3 records v1.2.3; Go 1.24 and
// later also stamp a pseudo-version such as
// v0.0.0-20261201214500-86aa27d1b2c3+dirty when building in a checkout);
// otherwise the VCS revision and whether the tree was modified
// ("devel 86aa27d1b2c3-dirty"); "dev" only when the build recorded none
// of these (-buildvcs=false outside a module version, or no build info).
func FromBuild(stamped string, bi *debug.BuildInfo) string {
	if stamped != "" {
		return stamped
	}
	if bi == nil {
		return "dev"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if rev == "" {
		return "dev"
	}
	rev = rev[:min(len(rev), 12)]
	if modified == "true" {
		rev += "-dirty"
	}
	return "devel " + rev
}

// Current is FromBuild of the running binary's own build info.
func Current(stamped string) string {
	bi, _ := debug.ReadBuildInfo() // nil when the binary has none
	return FromBuild(stamped, bi)
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
				return cmdutil.PrintJSON(f.IOStreams.Out, info)
			}
			_, err := fmt.Fprintln(f.IOStreams.Out, info.Line())
			return err
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print version, go, os and arch as JSON")
	return cmd
}
