package archtest

import (
	"go/build"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestArchitectureEdgesMatchImports: every row of docs/architecture.md's
// `go list` block names exactly the module packages that package imports
// on Linux (non-test files), so the picture of the stages cannot drift
// from the code.
func TestArchitectureEdgesMatchImports(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(moduleRoot, "docs/architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(doc), "the module's edges only")
	_, block, ok2 := strings.Cut(block, "```\n")
	block, _, ok3 := strings.Cut(block, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("docs/architecture.md has no `go list` edges block")
	}
	rows := map[string][]string{}
	var last string
	for line := range strings.Lines(block) {
		pkg, deps, found := strings.Cut(line, "->")
		if found {
			last = strings.TrimSpace(pkg)
		} else {
			deps = line
		}
		rows[last] = append(rows[last], strings.Fields(deps)...)
	}
	ctx := build.Default
	ctx.GOOS = "linux"
	const prefix = "github.com/amdrun/amdrun/internal/"
	for pkg, want := range rows {
		p, err := ctx.ImportDir(filepath.Join(moduleRoot, "internal", pkg), 0)
		if err != nil {
			t.Fatalf("%s: %v", pkg, err)
		}
		var got []string
		for _, imp := range p.Imports {
			if rest, ok := strings.CutPrefix(imp, prefix); ok {
				got = append(got, rest)
			}
		}
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("docs/architecture.md: %s -> %s; the code imports %s", pkg, strings.Join(want, " "), strings.Join(got, " "))
		}
	}
	if len(rows) < 5 {
		t.Errorf("read %d rows of the edges block", len(rows))
	}
}
