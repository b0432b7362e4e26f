package runcmd

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/amdrun/amdrun/cmd/amdrun/internal/cmdtest"
	"github.com/amdrun/amdrun/cmd/amdrun/internal/cmdutil"
	"github.com/amdrun/amdrun/internal/job"
	"github.com/amdrun/amdrun/internal/testutil"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// The launch flags' table in docs/usage.md lies between these lines.
const (
	flagDocBegin = "<!-- launch flags: made from runcmd's flagTable; go test ./cmd/amdrun/internal/runcmd -run TestFlagTableDoc -update rewrites it -->\n"
	flagDocEnd   = "<!-- end of launch flags -->\n"
)

// flagDoc is the docs' table of cmd's launch flags, one row per flag in
// --help's order: its spellings, torchrun's (and its PET_* variable),
// whether --launcher torchrun passes it on, its default and its help.
func flagDoc(cmd *cobra.Command) string {
	var b strings.Builder
	b.WriteString("| Flag | torchrun | `--launcher torchrun` | Default | Meaning |\n|---|---|---|---|---|\n")
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		name, usage := pflag.UnquoteUsage(f)
		flagCell := "`--" + f.Name
		switch {
		case name != "" && f.NoOptDefVal != "":
			flagCell += "[=" + name + "]"
		case name != "":
			flagCell += " " + name
		}
		flagCell += "`"
		if f.Shorthand != "" {
			flagCell += ", `-" + f.Shorthand + "`"
		}
		var torch, pass string
		if a, ok := f.Value.(*job.Arg); ok && a.Torch() != job.Own {
			torch = "`--" + strings.ReplaceAll(f.Name, "-", "_") + "`"
			if pet := a.PETVar(); pet != "" {
				torch += ", `" + pet + "`"
			}
			switch t := a.Torch(); {
			case t&job.NotToAgent != 0:
				pass = "passed on, not to torch's agent"
			case t&job.Pass != 0:
				pass = "passed on"
			}
		}
		def := f.DefValue
		switch def {
		case "", "false", "0", "[]", "0s":
			def = ""
		default:
			def = "`" + def + "`"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", flagCell, torch, pass, def, strings.ReplaceAll(usage, "|", `\|`))
	})
	return b.String()
}

// TestFlagTableDoc: docs/usage.md's table of launch flags is the one
// flagDoc makes from flagTable, so that it cannot drift from the flags.
func TestFlagTableDoc(t *testing.T) {
	ios, _, _, _ := cmdtest.Streams()
	want := flagDoc(NewCmdRun(&cmdutil.Factory{IOStreams: ios}, nil))
	path := filepath.Join(testutil.RepoRoot(t), "docs", "usage.md")
	doc := testutil.ReadFile(t, path)
	before, rest, ok1 := bytes.Cut(doc, []byte(flagDocBegin))
	_, after, ok2 := bytes.Cut(rest, []byte(flagDocEnd))
	if !ok1 || !ok2 {
		t.Fatalf("%s has no launch flags' table between %q and %q", path, flagDocBegin, flagDocEnd)
	}
	if u := flag.Lookup("update"); u != nil && u.Value.String() == "true" {
		out := slices.Concat(before, []byte(flagDocBegin+want+flagDocEnd), after)
		if err := os.WriteFile(path, out, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if got := string(rest[:len(rest)-len(after)-len(flagDocEnd)]); got != want {
		t.Errorf("docs/usage.md's launch flags differ from the flags (go test -run TestFlagTableDoc -update rewrites them); want:\n%s", want)
	}
}
