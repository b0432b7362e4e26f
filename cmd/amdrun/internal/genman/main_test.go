package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/amdrun/amdrun/cmd/amdrun/internal/cmdutil"
	"github.com/amdrun/amdrun/cmd/amdrun/internal/root"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// marked are the words of the pages' source text that markdown could
// take for markup: --nproc_per_node, PET_*, LOCAL_RANK, numa_balancing.
var marked = regexp.MustCompile(`[-\w$.]*[_*][-\w$.*]*`)

// The pages, rendered by man, show every flag of each command and every
// word of its text with "_" or "*" as written (issue 31: --nproc_per_node
// rendered as --nproc_pernode and PET_* as PET*, underscores read as
// emphasis).
func TestManPagesRender(t *testing.T) {
	man, err := exec.LookPath("man")
	if err != nil {
		t.Skip("man (man-db) is not installed: the pages are rendered where it is (CI)")
	}
	t.Setenv("SOURCE_DATE_EPOCH", "0")
	dir := t.TempDir()
	if err := generate(dir, "0.0.0-test"); err != nil {
		t.Fatal(err)
	}
	pages := 0
	var check func(c *cobra.Command)
	check = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			check(sub)
		}
		if !c.IsAvailableCommand() && c.HasParent() {
			return
		}
		pages++
		page := filepath.Join(dir, strings.ReplaceAll(c.CommandPath(), " ", "-")+".1")
		text := render(t, man, page)
		want := marked.FindAllString(c.Short+" "+c.Long, -1)
		for _, fs := range []*pflag.FlagSet{c.NonInheritedFlags(), c.InheritedFlags()} {
			fs.VisitAll(func(f *pflag.Flag) {
				if !f.Hidden {
					want = append(append(want, "--"+f.Name), marked.FindAllString(f.Usage, -1)...)
				}
			})
		}
		for _, e := range []string{`\_`, `\*`, `\<`, `\>`, `\[`, `\]`, "\\`"} {
			if strings.Contains(text, e) {
				t.Errorf("%s: an escape shows: %q", filepath.Base(page), e)
			}
		}
		for _, w := range want {
			if !strings.Contains(text, w) {
				t.Errorf("%s: %q is not in the rendered page", filepath.Base(page), w)
			}
		}
	}
	check(root.NewCmdRoot(cmdutil.New("0.0.0-test"))) // the text before escaping
	if pages < 10 {
		t.Errorf("%d pages checked, want one per command", pages)
	}
}

// render is page as man shows it, in ASCII, wide enough that lines
// rarely break; a word hyphenated at a line's end is joined again.
func render(t *testing.T, man, page string) string {
	t.Helper()
	cmd := exec.Command(man, "-E", "ascii", "-l", page)
	cmd.Env = append(os.Environ(), "MANWIDTH=1000", "MANPAGER=cat", "PAGER=cat", "LC_ALL=C")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("man -l %s: %v", page, err)
	}
	return regexp.MustCompile(`-\n\s+`).ReplaceAllString(string(out), "-")
}
