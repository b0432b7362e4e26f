// Package version is `amdrun version`.
package version

import (
	"encoding/json"
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

// Release is the version of record: the release this source is or comes
// after. The release step of docs/development.md sets it and tags the
// commit v<Release>; make reads it from here (packaging/version.sh).
const Release = "0.4.0"

// pseudoRevision is the revision of a Go pseudo-version
// (v0.0.0-20261201214500-86aa27d1b2c3+dirty: "86aa27d1b2c3", dirty), ok
// false for any other version.
func pseudoRevision(v string) (rev string, dirty, ok bool) {
	v, dirty = strings.CutSuffix(v, "+dirty")
	i := strings.LastIndexByte(v, '-')
	if i < 15 || len(v)-i-1 != 12 || strings.Trim(v[i+1:], "0123456789abcdef") != "" ||
		strings.Trim(v[i-14:i], "0123456789") != "" || !strings.ContainsRune(".-", rune(v[i-15])) {
		return "", false, false
	}
	return v[i+1:], dirty, true
}

// FromBuild is the version a binary reports: stamped, when the build set
// one (-ldflags "-X main.version=..." in make build and make dist, from
// packaging/version.sh); otherwise the module version the go command
// recorded (go install github.com/amdrun/amdrun/cmd/amdrun@v1.2.3
// records v1.2.3: "1.2.3"); otherwise Release and the VCS revision of
// the checkout it was built in, "0.4.0+g86aa27d1b2c3", with ".dirty" for
// a modified tree (Go 1.24 and later record a pseudo-version there, which
// says 0.0.0); Release+"+dev" when the build recorded none of these.
func FromBuild(stamped string, bi *debug.BuildInfo) string {
	if stamped != "" {
		return stamped
	}
	if bi == nil {
		return Release + "+dev"
	}
	v := bi.Main.Version
	prev, pdirty, isPseudo := pseudoRevision(v)
	if v != "" && v != "(devel)" && !isPseudo {
		return strings.TrimPrefix(v, "v")
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
	if rev == "" && isPseudo {
		rev, modified = prev, fmt.Sprint(pdirty)
	}
	if rev == "" {
		return Release + "+dev"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	v = Release + "+g" + rev
	if modified == "true" {
		v += ".dirty"
	}
	return v
}

// Current is FromBuild of the running binary's own build info.
func Current(stamped string) string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		bi = nil
	}
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
