package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
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

// copies are the fields (name and type) declared in more than two path
// structs: a setting copied field by field through a third struct.
func copies(decl map[string][]field) map[field][]string {
	in := map[field][]string{}
	for s, fs := range decl {
		for _, f := range fs {
			in[f] = append(in[f], s)
		}
	}
	out := map[field][]string{}
	for f, ss := range in {
		if len(ss) > 2 {
			sort.Strings(ss)
			out[f] = ss
		}
	}
	return out
}

// TestNoSettingInThreeStructs: no field (a name with its type) is
// declared in more than two of the path structs. A setting that several
// stages read is declared once and embedded (plan.Settings), or read by
// the later stage from the earlier one's struct.
func TestNoSettingInThreeStructs(t *testing.T) {
	decl := declared(t, moduleRoot, pathStructs)
	for dir, names := range pathStructs {
		for _, n := range names {
			pkg := filepath.Base(dir)
			if _, ok := decl[pkg+"."+n]; !ok {
				t.Errorf("%s.%s: no such struct in %s (update pathStructs)", pkg, n, dir)
			}
		}
	}
	// The command line's text stays in its flags (CommandLine.Value): a
	// field of raw text there would be a copy of another type, which the
	// name-and-type check below cannot see.
	for _, f := range decl["job.CommandLine"] {
		if !slices.Contains([]string{"Changed", "Value", "PET"}, f.name) {
			t.Errorf("job.CommandLine.%s %s: a flag's text is read through CommandLine.Value, not copied into a field", f.name, f.typ)
		}
	}
	for f, ss := range copies(decl) {
		t.Errorf("%s %s is declared in %d structs on a setting's path: %s (embed one struct, or let the later stage read the earlier one's)",
			f.name, f.typ, len(ss), strings.Join(ss, ", "))
	}
}

// TestPlantedCopyFails: the check above catches a setting copied into a
// third struct (here --grace, in job.Supervision and launch.RunOptions,
// planted into a new struct of plan's).
func TestPlantedCopyFails(t *testing.T) {
	planted := "internal/plan\npackage plan\nimport \"time\"\ntype Spec2 struct{ Grace time.Duration }\n"
	structs := map[string][]string{}
	for d, ns := range pathStructs {
		structs[d] = ns
	}
	structs["internal/plan"] = append(slices.Clone(structs["internal/plan"]), "Spec2")
	got := copies(declared(t, moduleRoot, structs, planted))
	want := []string{"job.Supervision", "launch.RunOptions", "plan.Spec2"}
	if ss := got[field{"Grace", "time.Duration"}]; !slices.Equal(ss, want) || len(got) != 1 {
		t.Errorf("planted Grace: copies %v, want Grace in %v only", got, want)
	}
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
