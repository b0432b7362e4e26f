package archtest

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// pathStructs are the structs a launch setting passes through on its way
// from its flag to the package that uses it, by package directory: the
// command's Options, the command line job reads, job's stages and plan,
// and what each stage hands on (issue 21: "no setting is copied through
// more than two structs"). Results a stage computes (selector.Choice,
// plan.Rank, job.Document) and the Slurm allocation (slurm.Job, a source
// like the flags) are not on the path.
var pathStructs = map[string][]string{
	"cmd/amdrun/internal/runcmd": {"Options"},
	"internal/job":               {"CommandLine", "Options", "Deps", "Selection", "Planning", "Supervision", "Plan"},
	"internal/selector":          {"Request"},
	"internal/reserve":           {"Options"},
	"internal/plan":              {"Settings", "Spec", "Plan", "Torchrun"},
	"internal/launch":            {"RunOptions"},
}

// field is a field a struct declares (an embedded struct is not one: it
// carries the fields of the struct it embeds, declared there).
type field struct {
	name, typ string // typ is package-qualified: selector.Order, []int
}

// declared reads the fields each path struct declares, keyed
// "pkg.Struct", from the packages' non-test source under root.
func declared(t *testing.T, root string, structs map[string][]string, extra ...string) map[string][]field {
	t.Helper()
	out := map[string][]field{}
	for dir, names := range structs {
		fset := token.NewFileSet()
		var files []*ast.File
		ents, err := os.ReadDir(filepath.Join(root, dir))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if n := e.Name(); strings.HasSuffix(n, ".go") && !strings.HasSuffix(n, "_test.go") {
				f, err := parser.ParseFile(fset, filepath.Join(root, dir, n), nil, 0)
				if err != nil {
					t.Fatal(err)
				}
				files = append(files, f)
			}
		}
		for _, src := range extra {
			if d, code, ok := strings.Cut(src, "\n"); ok && d == dir {
				f, err := parser.ParseFile(fset, "planted.go", code, 0)
				if err != nil {
					t.Fatal(err)
				}
				files = append(files, f)
			}
		}
		for _, f := range files {
			collect(f, names, out)
		}
	}
	return out
}

// collect adds the fields of f's structs named in names to out.
func collect(f *ast.File, names []string, out map[string][]field) {
	pkg := f.Name.Name
	ast.Inspect(f, func(n ast.Node) bool {
		ts, ok := n.(*ast.TypeSpec)
		if !ok || !slices.Contains(names, ts.Name.Name) {
			return true
		}
		st, ok := ts.Type.(*ast.StructType)
		if !ok {
			return true
		}
		for _, fl := range st.Fields.List {
			typ := qualified(pkg, fl.Type)
			for _, nm := range fl.Names {
				out[pkg+"."+ts.Name.Name] = append(out[pkg+"."+ts.Name.Name], field{nm.Name, typ})
			}
		}
		return false
	})
}

// qualified is e as text with its package's own exported types named by
// the package (Order in package selector is selector.Order), so that a
// type reads the same from every package.
func qualified(pkg string, e ast.Expr) string {
	var q func(ast.Expr) ast.Expr
	q = func(e ast.Expr) ast.Expr {
		switch x := e.(type) {
		case *ast.Ident:
			if ast.IsExported(x.Name) {
				return &ast.SelectorExpr{X: ast.NewIdent(pkg), Sel: x}
			}
		case *ast.StarExpr:
			return &ast.StarExpr{X: q(x.X)}
		case *ast.ArrayType:
			return &ast.ArrayType{Len: x.Len, Elt: q(x.Elt)}
		case *ast.MapType:
			return &ast.MapType{Key: q(x.Key), Value: q(x.Value)}
		case *ast.ChanType:
			return &ast.ChanType{Dir: x.Dir, Value: q(x.Value)}
		}
		return e
	}
	return types.ExprString(q(e))
}

// TestJobReadsNoFlagByName: internal/job reads the command line by
// field (job.CommandLine's Args), never by a flag's name: no string
// literal of its non-test code is a launch flag's bare name, the key of
// a lookup ("--name" inside a message is wording). A flag renamed in runcmd then changes what job reads, or fails
// to compile, instead of panicking on a nil *pflag.Flag at run time.
func TestJobReadsNoFlagByName(t *testing.T) {
	names := launchFlags(t)
	if len(names) < 50 {
		t.Fatalf("found %d launch flags", len(names))
	}
	for _, hit := range flagLiterals(t, filepath.Join(moduleRoot, "internal/job"), names, "") {
		t.Errorf("%s: job reads a flag by its name; read its job.CommandLine field", hit)
	}
}

// TestPlantedFlagNameFails: the check above catches a flag read by name
// (here --wait, through a lookup planted in job).
func TestPlantedFlagNameFails(t *testing.T) {
	planted := "package job\nfunc wait(value func(string) string) string { return value(\"wait\") }\n"
	got := flagLiterals(t, filepath.Join(moduleRoot, "internal/job"), launchFlags(t), planted)
	if len(got) != 1 || !strings.HasSuffix(got[0], `"wait"`) {
		t.Errorf("planted lookup of \"wait\": found %q, want it alone", got)
	}
}

// launchFlags are the launch command's flag names, read from runcmd's
// source: the first string argument of each declaration (pflag's
// ...Var(P), runcmd's declare and value), and the Name of each
// cmdutil.Enum (cmdutil.EnumVar's string is the default).
func launchFlags(t *testing.T) map[string]bool {
	t.Helper()
	dir := filepath.Join(moduleRoot, "cmd/amdrun/internal/runcmd")
	names := map[string]bool{}
	add := func(e ast.Expr) bool {
		if lit, ok := e.(*ast.BasicLit); ok && lit.Kind == token.STRING {
			v, _ := strconv.Unquote(lit.Value)
			names[v] = true
			return true
		}
		return false
	}
	for _, f := range parseDir(t, dir, "") {
		ast.Inspect(f, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.CallExpr:
				fn := types.ExprString(x.Fun)
				fn = fn[strings.LastIndex(fn, ".")+1:]
				if fn == "declare" || fn == "value" || (fn != "EnumVar" && strings.HasSuffix(strings.ToLower(strings.TrimSuffix(fn, "P")), "var")) {
					_ = slices.IndexFunc(x.Args, add)
				}
			case *ast.CompositeLit:
				if sel, ok := x.Type.(*ast.SelectorExpr); ok && sel.Sel.Name == "Enum" {
					for _, e := range x.Elts {
						if kv, ok := e.(*ast.KeyValueExpr); ok && types.ExprString(kv.Key) == "Name" {
							add(kv.Value)
						}
					}
				}
			}
			return true
		})
	}
	return names
}

// parseDir parses dir's non-test Go files, and planted when not "".
func parseDir(t *testing.T, dir, planted string) []*ast.File {
	t.Helper()
	fset := token.NewFileSet()
	var files []*ast.File
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if n := e.Name(); strings.HasSuffix(n, ".go") && !strings.HasSuffix(n, "_test.go") {
			f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
		}
	}
	if planted != "" {
		f, err := parser.ParseFile(fset, "planted.go", planted, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return files
}

// flagLiterals are the string literals of dir's non-test Go files (and of
// planted, when not "") that are a flag of names, as "file:line: lit".
func flagLiterals(t *testing.T, dir string, names map[string]bool, planted string) []string {
	t.Helper()
	var out []string
	for _, f := range parseDir(t, dir, planted) {
		name := f.Name.Name
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			if v, err := strconv.Unquote(lit.Value); err == nil && names[v] {
				out = append(out, fmt.Sprintf("%s: %s", name, lit.Value))
			}
			return true
		})
	}
	return out
}

// settingsTable is docs/architecture.md's table of where each setting
// lives: a row per setting, its flag(s), then each struct.Field it is
// declared in.
var settingsRow = regexp.MustCompile("^\\| (.+?) \\| `([A-Za-z.]+)` \\| (?:`([A-Za-z.]+)`|—) \\|")

// TestSettingsTableMatchesCode: every row of docs/architecture.md's
// settings table names fields the structs declare, with the same type
// where a row names two; and every field of job's stages, plan.Settings
// and the command's own Options has a row.
func TestSettingsTableMatchesCode(t *testing.T) {
	decl := declared(t, moduleRoot, pathStructs)
	typeOf := func(ref string) (string, bool) {
		i := strings.LastIndex(ref, ".")
		for _, f := range decl[ref[:i]] {
			if f.name == ref[i+1:] {
				return f.typ, true
			}
		}
		return "", false
	}
	doc, err := os.ReadFile(filepath.Join(moduleRoot, "docs/architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]bool{}
	for _, line := range strings.Split(string(doc), "\n") {
		m := settingsRow.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		first, second := m[2], m[3]
		t1, ok := typeOf(first)
		if !ok {
			t.Errorf("settings table row %q: %s is not a field of a path struct", m[1], first)
			continue
		}
		rows[first] = true
		if second == "" {
			continue
		}
		if t2, ok := typeOf(second); !ok {
			t.Errorf("settings table row %q: %s is not a field of a path struct", m[1], second)
		} else if strings.HasSuffix(first, second[strings.LastIndex(second, "."):]) && t1 != t2 {
			t.Errorf("settings table row %q: %s is %s but %s is %s", m[1], first, t1, second, t2)
		}
	}
	if len(rows) < 30 {
		t.Fatalf("found %d rows of the settings table in docs/architecture.md", len(rows))
	}
	for _, s := range []string{"job.Selection", "job.Planning", "job.Supervision", "job.Options", "plan.Settings", "runcmd.Options"} {
		for _, f := range decl[s] {
			if s == "runcmd.Options" && f.name == "IO" {
				continue // a dependency, not a setting
			}
			if ref := s + "." + f.name; !rows[ref] {
				t.Errorf("%s has no row in docs/architecture.md's settings table", ref)
			}
		}
	}
}
