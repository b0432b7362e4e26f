package topology

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestParseErrorsMadeOneWay holds the parsers to one way of making a
// *ParseError (issue 21): NewParseError, or LineReader.Errorf, which calls
// it. A struct literal outside errors.go and text.go is a second way:
// in this package and those under it, or in internal/slurm, whose
// hostlist parser reports a *ParseError too.
func TestParseErrorsMadeOneWay(t *testing.T) {
	literal := regexp.MustCompile(`&(topology\.)?ParseError\{`)
	check := func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "testdata" {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") || p == "errors.go" || p == "text.go" {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			if literal.MatchString(line) {
				t.Errorf("%s:%d: a *ParseError literal; use NewParseError: %s", p, i+1, strings.TrimSpace(line))
			}
		}
		return nil
	}
	for _, root := range []string{".", filepath.Join("..", "slurm")} {
		if err := filepath.WalkDir(root, check); err != nil {
			t.Fatal(err)
		}
	}
}
