package runcmd

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/amdrun/amdrun/cmd/amdrun/internal/cmdtest"
	"github.com/amdrun/amdrun/cmd/amdrun/internal/cmdutil"
	"github.com/amdrun/amdrun/internal/job"
	"github.com/amdrun/amdrun/internal/testutil"
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

// numaBindingRow is the start of docs/torchrun.md's row of --numa-binding,
// up to its notes: torchrun's words as numaBindingFlag declares them, and
// the --bind word each is (its help's "= --bind WORD", else the same word).
func numaBindingRow() string {
	var from, to []string
	for _, w := range numaBindingFlag.Words {
		bind := w.Name
		if b, ok := strings.CutPrefix(w.Help, "= --bind "); ok {
			bind = b
		}
		from, to = append(from, w.Name), append(to, bind)
	}
	return "| `--numa-binding " + strings.Join(from, "` / `") + "` | `--bind " + strings.Join(to, "` / `") + "` ("
}

// TestNUMABindingDoc: docs/torchrun.md's --numa-binding row starts as
// numaBindingRow makes it from the flag's declaration (-update rewrites
// that start). The row sits inside a hand-written table, where
// DocBlock's marker lines would end the table, so it is checked by its
// first cell.
func TestNUMABindingDoc(t *testing.T) {
	const doc = "docs/torchrun.md"
	path := filepath.Join(testutil.RepoRoot(t), doc)
	lines := strings.Split(string(testutil.ReadFile(t, path)), "\n")
	want := numaBindingRow()
	for i, l := range lines {
		if !strings.HasPrefix(l, "| `--numa-binding ") {
			continue
		}
		if strings.HasPrefix(l, want) {
			return
		}
		if u := flag.Lookup("update"); u != nil && u.Value.String() == "true" {
			_, notes, _ := strings.Cut(l, " | ")
			_, notes, _ = strings.Cut(notes, " (")
			lines[i] = want + notes
			if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		t.Fatalf("%s: the --numa-binding row starts %q, want %q (go test -run %s -update rewrites it)", doc, l[:min(len(l), len(want))], want, t.Name())
	}
	t.Fatalf("%s has no row of --numa-binding", doc)
}
