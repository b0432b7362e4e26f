// Command genman writes amdrun's man pages (amdrun.1, amdrun-topo.1, ...)
// from its command tree with cobra's doc generator, for make dist:
//
//	go run ./cmd/amdrun/internal/genman DIR
//
// A program of its own, so that the generator stays out of amdrun; the
// pages' date is $SOURCE_DATE_EPOCH.
package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/amdrun/amdrun/cmd/amdrun/internal/cmdutil"
	"github.com/amdrun/amdrun/cmd/amdrun/internal/root"
	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
	"github.com/spf13/pflag"
)

func main() {
	if len(os.Args) != 2 || os.Args[1] == "" {
		fmt.Fprintln(os.Stderr, "usage: genman DIR")
		os.Exit(2)
	}
	if os.Getenv("SOURCE_DATE_EPOCH") == "" {
		fmt.Fprintln(os.Stderr, "genman: set SOURCE_DATE_EPOCH (the pages' date; make dist sets the commit's)")
		os.Exit(2)
	}
	if err := generate(os.Args[1], os.Getenv("AMDRUN_VERSION")); err != nil {
		fmt.Fprintf(os.Stderr, "genman: %v\n", err)
		os.Exit(1)
	}
}

// generate writes the pages of amdrun version into dir.
func generate(dir, version string) error {
	cmd := root.NewCmdRoot(cmdutil.New(version))
	cmd.DisableAutoGenTag = true // its "Auto generated ... on DATE" line
	escapeTree(cmd, map[*pflag.Flag]bool{})
	header := &doc.GenManHeader{Title: "AMDRUN", Section: "1", Source: "amdrun " + version, Manual: "amdrun manual"}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return doc.GenManTree(cmd, header, dir)
}

// markup escapes the characters of text that cobra's generator would
// hand to the markdown renderer as markup: --nproc_per_node lost its
// underscores and PET_* its "_" to emphasis (issue 31).
var markup = strings.NewReplacer(`\`, `\\`, "`", "\\`", "*", `\*`, "_", `\_`, "<", `\<`, ">", `\>`, "[", `\[`, "]", `\]`)

// escape is text with its markup escaped, except in its code blocks
// (lines indented by a tab or four spaces after a blank or another such
// line, as in cobra's completion pages).
func escape(text string) string {
	lines := strings.Split(text, "\n")
	code, blank := false, true
	for i, l := range lines {
		indented := strings.HasPrefix(l, "\t") || strings.HasPrefix(l, "    ")
		switch {
		case strings.TrimSpace(l) == "":
		case indented && (blank || code):
			code = true
		default:
			code = false
			lines[i] = markup.Replace(l)
		}
		blank = strings.TrimSpace(l) == ""
	}
	return strings.Join(lines, "\n")
}

// escapeTree escapes Short, Long and each flag's usage (without pflag's
// backquotes) of c and its subcommands, each flag once (done).
func escapeTree(c *cobra.Command, done map[*pflag.Flag]bool) {
	c.Short, c.Long = escape(c.Short), escape(c.Long)
	for _, fs := range []*pflag.FlagSet{c.Flags(), c.PersistentFlags()} {
		fs.VisitAll(func(f *pflag.Flag) {
			if !done[f] {
				f.Usage, done[f] = escape(strings.ReplaceAll(f.Usage, "`", "")), true
			}
		})
	}
	for _, sub := range c.Commands() {
		escapeTree(sub, done)
	}
}
