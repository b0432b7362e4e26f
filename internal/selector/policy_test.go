package selector

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"math/bits"
	"math/rand/v2"
	"os"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
)

// policyBranches lists, as "file:line: what", every place of the
// package's files (name -> source) that branches on a Policy: an == or
// != with a Policy operand, a switch on a Policy, or a Policy constant
// named outside the declaration (policy.go) and the table (terms.go).
// It also counts the constants' uses in terms.go, which shows the type
// checker resolved them.
func policyBranches(t *testing.T, files map[string]string) (found []string, tableUses int) {
	t.Helper()
	fset := token.NewFileSet()
	var parsed []*ast.File
	for name, src := range files {
		f, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		parsed = append(parsed, f)
	}
	info := &types.Info{Types: map[ast.Expr]types.TypeAndValue{}, Uses: map[*ast.Ident]types.Object{}}
	// Other packages are not imported: what the scan needs (the Policy
	// type, its constants, the package's structs) is declared here, and
	// the errors about the rest are ignored.
	conf := types.Config{Importer: noImports{}, Error: func(error) {}}
	pkg, _ := conf.Check("selector", fset, parsed, info)
	obj := pkg.Scope().Lookup("Policy")
	if obj == nil {
		t.Fatal("no Policy type in the package")
	}
	policy := obj.Type()
	isPolicy := func(e ast.Expr) bool {
		tv, ok := info.Types[e]
		return ok && tv.Type != nil && types.Identical(tv.Type, policy)
	}
	at := func(n ast.Node, what string) {
		p := fset.Position(n.Pos())
		found = append(found, fmt.Sprintf("%s:%d: %s", p.Filename, p.Line, what))
	}
	for _, f := range parsed {
		name := fset.Position(f.Pos()).Filename
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.BinaryExpr:
				if (n.Op == token.EQL || n.Op == token.NEQ) && (isPolicy(n.X) || isPolicy(n.Y)) {
					at(n, "compares a Policy")
				}
			case *ast.SwitchStmt:
				if n.Tag != nil && isPolicy(n.Tag) {
					at(n, "switches on a Policy")
				}
			case *ast.Ident:
				c, ok := info.Uses[n].(*types.Const)
				if !ok || !types.Identical(c.Type(), policy) {
					break
				}
				switch name {
				case "terms.go":
					tableUses++
				case "policy.go":
				default:
					at(n, "names "+c.Name())
				}
			}
			return true
		})
	}
	sort.Strings(found)
	return found, tableUses
}

type noImports struct{}

func (noImports) Import(path string) (*types.Package, error) {
	return nil, errors.New("not imported")
}

// packageSources are the package's non-test files.
func packageSources(t *testing.T) map[string]string {
	t.Helper()
	ents, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, e := range ents {
		if n := e.Name(); strings.HasSuffix(n, ".go") && !strings.HasSuffix(n, "_test.go") {
			b, err := os.ReadFile(n)
			if err != nil {
				t.Fatal(err)
			}
			files[n] = string(b)
		}
	}
	return files
}

// The done-when of issue 21 for policies: what a policy does is stated in
// its row of policies (terms.go), and nothing else in the package
// branches on which policy it is. The scan is shown to catch the
// branches the package used to have, planted in a file of its own.
func TestPolicyTableIsTheOnlyPlace(t *testing.T) {
	files := packageSources(t)
	found, uses := policyBranches(t, files)
	if len(found) > 0 {
		t.Errorf("policy-specific code outside the policies table (terms.go):\n%s", strings.Join(found, "\n"))
	}
	if uses < len(policies) {
		t.Errorf("the scan resolved %d uses of the Policy constants in terms.go, want at least %d (one a row)", uses, len(policies))
	}
	files["planted.go"] = `package selector
func planted(p *problem, q Policy) int64 {
	if p.policy == Ring {
		return 1
	}
	switch q {
	case Tree:
		return 2
	}
	if Tree != q {
		return 3
	}
	return int64(Ring)
}
`
	found, _ = policyBranches(t, files)
	want := []string{"planted.go:10: compares a Policy", "planted.go:10: names Tree", "planted.go:13: names Ring",
		"planted.go:3: compares a Policy", "planted.go:3: names Ring", "planted.go:6: switches on a Policy", "planted.go:7: names Tree"}
	if !slices.Equal(found, want) {
		t.Errorf("planted branches found as\n%s\nwant\n%s", strings.Join(found, "\n"), strings.Join(want, "\n"))
	}
}

// Every row of policies is complete: a name PolicyByName and String
// agree on, pair terms in the order of their key slots (the key compares
// slot by slot, so a Score listing them in another order would not be
// its ranking), and every function.
func TestPolicyRowsComplete(t *testing.T) {
	if !slices.Equal(PolicyNames, policyNames()) {
		t.Errorf("PolicyNames %v, the table's %v", PolicyNames, policyNames())
	}
	seen := map[string]bool{}
	for i := range policies {
		row := &policies[i]
		p := Policy(i)
		if row.name == "" || row.name != strings.ToLower(row.name) || seen[row.name] {
			t.Errorf("row %d: name %q (empty, not lower-case or taken)", i, row.name)
		}
		seen[row.name] = true
		if got, err := PolicyByName(row.name); err != nil || got != p || p.String() != row.name {
			t.Errorf("row %d: PolicyByName(%q) = %v, %v; String %q", i, row.name, got, err, p.String())
		}
		if len(row.pairs) == 0 {
			t.Errorf("row %s: no pair terms", row.name)
		}
		for j, st := range row.pairs {
			if st.slot >= kTies || j > 0 && st.slot <= row.pairs[j-1].slot || st.name == "" {
				t.Errorf("row %s: pair term %d %+v out of slot order or unnamed", row.name, j, st)
			}
		}
		v := reflect.ValueOf(*row)
		for f := 0; f < v.NumField(); f++ {
			if v.Field(f).Kind() == reflect.Func && v.Field(f).IsNil() {
				t.Errorf("row %s: no %s function", row.name, v.Type().Field(f).Name)
			}
		}
	}
	if p := Policy(len(policies)); p.valid() || p.String() != fmt.Sprintf("Policy(%d)", len(policies)) {
		t.Errorf("Policy(%d) past the table: valid %v, String %q", len(policies), p.valid(), p.String())
	}
}

// cutRule is a dummy third policy, written as one more row: it ranks by
// the set's global min cut, then the total.
var cutRule = policyRule{
	name:  "cut",
	pairs: []slotTerm{{kCut, "mincut", "MB/s", false}, {kTotal, "total", "MB/s", false}, {kLocality, "locality", "", false}},
	eval:  func(p *problem, vs []int) (int64, int64, bool, int64) { return 0, p.minCut(vs), true, 0 },
	enum: func(p *problem, worst *key, vs []int) (int64, int64, bool) {
		cut := p.minCut(vs)
		return 0, cut, worst == nil || cut >= worst[kCut]
	},
	leaf: func(b *classSearch, _ []int, _ key) (int64, int64, bool) {
		return 0, b.p.minCut(b.setMask.list()), true
	},
	first: func(*classSearch, int, int, int64) int64 { return 0 },
	// as the ring's: the min cut is at most the smallest degree and the
	// mean degree
	cut: func(b *classSearch, c, r int, total int64) int64 {
		return min(b.degreeUB(c, r), 2*total/int64(b.size))
	},
	prepare: func(*problem) {},
	seeds:   func(*problem, *classSearch, int64) [][]int { return nil },
	ring:    func(*problem, *entry, *result, []int) ([]int, bool) { return nil, false },
}

// Adding a policy is one row (cutRule) and nothing else: PolicyByName
// knows it, and enumeration, branch-and-bound and Select's public path
// all find the set an independent brute force ranks first by min cut,
// then total, locality and the tie-breaks, with the Score naming its
// terms. A search that ignored the row (ranking by the tree bottleneck,
// or bounding the cut by another policy's rule) would miss it.
func TestThirdPolicyIsOneRow(t *testing.T) {
	// The table is the package's: no test here runs in parallel.
	saved := policies
	policies = append(slices.Clip(policies), cutRule)
	defer func() { policies = saved }()
	cut, err := PolicyByName("cut")
	if err != nil || cut.String() != "cut" {
		t.Fatalf("PolicyByName(cut) = %v, %v", cut, err)
	}
	r := rand.New(rand.NewPCG(21, 6))
	changed, cases := 0, 0
	for g := 0; g < 40; g++ {
		m := randomNode(t, r, 2+r.IntN(9)) // 2..10 devices
		nc := len(m.Devices)
		cands := firstN(nc).list()
		for size := 1; size <= nc; size++ {
			name := fmt.Sprintf("graph %d n=%d size=%d", g, nc, size)
			want := &topK{k: 1}
			for mask := uint64(1); mask < 1<<nc; mask++ {
				if bits.OnesCount64(mask) != size {
					continue
				}
				set := bitset{mask}
				vs := set.list()
				k := bruteKey(m, vs, cands, Tree)
				k[kFirst] = 0
				if size >= 2 {
					k[kCut] = bruteCut(size, func(i, j int) int64 { return m.BW(vs[i], vs[j]) })
				}
				want.offer(entry{key: k, mask: set})
			}
			if got := newProblem(m, cands, cut, size, rules{}).enumerate(1); !got.exact || got.top[0] != want.e[0] {
				t.Fatalf("%s: enumeration %v, brute force %v", name, got.top, want.e)
			}
			p := newProblem(m, cands, cut, size, rules{})
			got := p.branchAndBound(1)
			if !got.exact || got.top[0] != want.e[0] {
				t.Fatalf("%s: branch-and-bound %v, brute force %v", name, got.top, want.e)
			}
			ch, err := Prepare(m).Select(Request{N: size, AllowBusy: true}, cut)
			if err != nil {
				t.Fatal(err)
			}
			if ch.Policy != "cut" || !slices.Equal(ch.Devices, want.e[0].mask.list()) || ch.Ring != nil {
				t.Fatalf("%s: Select chose %v (policy %s, ring %v), brute force %v", name, ch.Devices, ch.Policy, ch.Ring, want.e[0].mask.list())
			}
			if size >= 2 {
				mc, ok := ch.Score.Term("mincut")
				if _, bn := ch.Score.Term("bottleneck"); !ok || bn || mc.Value != float64(want.e[0].key[kCut]) || ch.Score.Terms[0].Name != "mincut" {
					t.Fatalf("%s: score %v, want mincut %d first", name, ch.Score, want.e[0].key[kCut])
				}
			}
			tree, err := Prepare(m).Select(Request{N: size, AllowBusy: true}, Tree)
			if err != nil {
				t.Fatal(err)
			}
			cases++
			if !slices.Equal(tree.Devices, ch.Devices) {
				changed++
			}
		}
	}
	// 20 devices: Select's branch-and-bound, seeds and all
	m := randomNode(t, r, 20)
	cands := firstN(20).list()
	for size := 2; size <= 3; size++ {
		want := &topK{k: 1}
		combos := [][]int{}
		for a := 0; a < 20; a++ {
			for b := a + 1; b < 20; b++ {
				if size == 2 {
					combos = append(combos, []int{a, b})
					continue
				}
				for c := b + 1; c < 20; c++ {
					combos = append(combos, []int{a, b, c})
				}
			}
		}
		for _, vs := range combos {
			k := bruteKey(m, vs, cands, Tree)
			k[kFirst] = 0
			k[kCut] = bruteCut(size, func(i, j int) int64 { return m.BW(vs[i], vs[j]) })
			want.offer(entry{key: k, mask: setOf(vs)})
		}
		ch, err := Prepare(m).Select(Request{N: size, AllowBusy: true}, cut)
		if err != nil {
			t.Fatal(err)
		}
		if !ch.Exact || !slices.Equal(ch.Devices, want.e[0].mask.list()) {
			t.Fatalf("20 devices, size %d: Select chose %v (exact %v), brute force %v", size, ch.Devices, ch.Exact, want.e[0].mask.list())
		}
	}
	if changed == 0 {
		t.Fatalf("the cut policy chose as the tree does in all %d cases: the test cannot tell", cases)
	}
	t.Logf("the cut policy chose otherwise than the tree in %d of %d cases", changed, cases)
}
