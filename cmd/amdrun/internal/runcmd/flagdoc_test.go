package runcmd

import (
	"fmt"
	"strings"
	"testing"

	"github.com/amdrun/amdrun/cmd/amdrun/internal/cmdtest"
	"github.com/amdrun/amdrun/cmd/amdrun/internal/cmdutil"
	"github.com/amdrun/amdrun/internal/job"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
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
	cmdtest.DocBlock(t, "docs/usage.md", flagDoc(NewCmdRun(&cmdutil.Factory{IOStreams: ios}, nil)))
}

// agentOnlyDoc is docs/torchrun.md's table of the job.AgentOnly flags of
// cmd: each, and why it does nothing when amdrun starts the ranks.
func agentOnlyDoc(cmd *cobra.Command) string {
	b := strings.Builder{}
	b.WriteString("| torchrun flag | why it does nothing when amdrun starts the ranks | a line says so |\n| --- | --- | --- |\n")
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if a, ok := f.Value.(*job.Arg); ok && a.Torch()&job.AgentOnly != 0 {
			said := map[bool]string{true: "no", false: "yes"}[a.Torch()&job.Quiet != 0]
			fmt.Fprintf(&b, "| `--%s` | %s | %s |\n", f.Name, strings.TrimPrefix(f.Usage, agentOnlyHelp), said)
		}
	})
	return b.String()
}

// TestAgentOnlyDoc: docs/torchrun.md's table of the flags only torch's
// agent uses is the one agentOnlyDoc makes from flagTable.
func TestAgentOnlyDoc(t *testing.T) {
	ios, _, _, _ := cmdtest.Streams()
	cmdtest.DocBlock(t, "docs/torchrun.md", agentOnlyDoc(NewCmdRun(&cmdutil.Factory{IOStreams: ios}, nil)))
}
