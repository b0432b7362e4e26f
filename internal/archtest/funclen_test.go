package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// maxLines is the most lines a non-test function may have, from its
// func keyword to its closing brace (issue 21: "functions a reader can
// hold").
const maxLines = 80

// overLong are the functions allowed past maxLines for now, each with
// the length it may not grow past and why. A data table would go here;
// none is needed today.
var overLong = map[string]struct {
	lines int
	why   string
}{}

// moduleRoot is the repository root, two levels above this package.
const moduleRoot = "../.."

// TestNoLongFunctions measures every non-test function of the module
// (testdata left out) and fails on one over maxLines that overLong does
// not allow, or on an allowed one that grew.
func TestNoLongFunctions(t *testing.T) {
	n := 0
	walkGo(t, func(rel string, fset *token.FileSet, f *ast.File) {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			n++
			lines := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
			name := rel + ":" + fd.Name.Name
			allowed, excepted := overLong[name]
			switch {
			case excepted && lines > allowed.lines:
				t.Errorf("%s is %d lines, was %d (%s): split it along its steps", name, lines, allowed.lines, allowed.why)
			case excepted && lines <= maxLines:
				t.Logf("%s is %d lines now: remove it from overLong", name, lines)
			case !excepted && lines > maxLines:
				t.Errorf("%s is %d lines, over %d: split it along its steps", name, lines, maxLines)
			}
		}
	})
	if n < 500 {
		t.Fatalf("measured %d functions: the walk missed the module", n)
	}
}

// walkGo parses every non-test Go file of the module (testdata and
// hidden directories left out) and calls visit with its path from the
// module root.
func walkGo(t *testing.T, visit func(rel string, fset *token.FileSet, f *ast.File)) {
	t.Helper()
	err := filepath.WalkDir(moduleRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != moduleRoot && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") || d.Name() == "bin" || strings.HasPrefix(d.Name(), "dist")) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(moduleRoot, p)
		if err != nil {
			return err
		}
		visit(filepath.ToSlash(rel), fset, f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
