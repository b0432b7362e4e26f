// Package cmdtest is test support for the command packages, which only
// tests import (make deadcode leaves it out: docs/development.md).
package cmdtest

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/amdrun/amdrun/cmd/amdrun/internal/iostreams"
	"github.com/amdrun/amdrun/internal/testutil"
)

// Streams returns streams on buffers, none a terminal, and the buffers.
func Streams() (*iostreams.IOStreams, *bytes.Buffer, *bytes.Buffer, *bytes.Buffer) {
	in, out, errOut := &bytes.Buffer{}, &bytes.Buffer{}, &bytes.Buffer{}
	return iostreams.New(in, out, errOut, false, false), in, out, errOut
}

// SetStdoutTTY makes s's Out count as a terminal (v) or not.
func SetStdoutTTY(s *iostreams.IOStreams, v bool) {
	*s = *iostreams.New(s.In, s.Out, s.ErrOut, v, s.IsStderrTTY())
}

// DocBlock checks that the block of doc (a path under the repository
// root) between the lines that name the test t is want, or with -update
// rewrites it.
func DocBlock(t *testing.T, doc, want string) {
	t.Helper()
	wd, _ := os.Getwd()
	pkg, _ := filepath.Rel(testutil.RepoRoot(t), wd)
	begin := fmt.Sprintf("<!-- made by go test ./%s -run %s -update; do not edit -->\n", filepath.ToSlash(pkg), t.Name())
	end := "<!-- end of " + t.Name() + " -->\n"
	path := filepath.Join(testutil.RepoRoot(t), doc)
	text := string(testutil.ReadFile(t, path))
	before, rest, ok1 := strings.Cut(text, begin)
	got, after, ok2 := strings.Cut(rest, end)
	if !ok1 || !ok2 {
		t.Fatalf("%s has no block between %q and %q", doc, begin, end)
	}
	if u := flag.Lookup("update"); u != nil && u.Value.String() == "true" {
		if err := os.WriteFile(path, []byte(before+begin+want+end+after), 0o644); err != nil {
			t.Fatal(err)
		}
	} else if got != want {
		t.Errorf("%s differs from its declarations (go test -run %s -update rewrites it); want:\n%s", doc, t.Name(), want)
	}
}
