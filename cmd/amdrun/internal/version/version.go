// Package version is `amdrun version`.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

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

// Release is the release this source is or comes after; the release step
// of docs/development.md sets it, make reads it (packaging/version.sh).
const Release = "0.4.0"

// FromBuild is the version a binary reports: stamped, when the build set
// one (make build, make dist); else the module version the go command
// recorded (go install ...@v1.2.3: "1.2.3"); else, in a checkout at no
// tag (Go 1.24 records a 0.0.0 pseudo-version), Release and the VCS
// revision, "0.4.0+g86aa27d1b2c3[.dirty]"; else Release+"+dev".
func FromBuild(stamped string, bi *debug.BuildInfo) string {
	if stamped != "" {
		return stamped
	}
	if bi == nil {
		return Release + "+dev"
	}
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value[:min(len(s.Value), 12)]
		case "vcs.modified":
			modified = s.Value
		}
	}
	v := bi.Main.Version
	switch {
	case rev == "" && (v == "" || v == "(devel)"):
		return Release + "+dev"
	case rev == "" || v != "" && v != "(devel)" && !strings.Contains(v, rev):
		return strings.TrimPrefix(v, "v")
	case modified == "true":
		return Release + "+g" + rev + ".dirty"
	}
	return Release + "+g" + rev
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

// Line is what `amdrun version` and `--version` print: "amdrun 1.2.3
// (go1.26.0, linux/amd64)".
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
