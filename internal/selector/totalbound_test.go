package selector

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/amdrun/amdrun/internal/topology"
)

// The bound of a subtree (classSearch.upper) is at least the key of every
// set in it, term by term in the key's order: the search's exactness and
// its reported gap rest on it (issue 25). Each subtree here is a random
// partial set (how many members each class below a random depth gives);
// every set that completes it is scored by bruteKey, the independent
// scorer, and none may rank above the bound.
func TestUpperBoundsEverySubtreeSet(t *testing.T) {
	r := rand.New(rand.NewPCG(25, 2))
	graphs := 120
	if testing.Short() {
		graphs = 30
	}
	subtrees := 0
	for g := 0; g < graphs; g++ {
		var m *topology.Model
		switch g % 3 {
		case 0:
			m = randomNode(t, r, 4+r.IntN(9)) // 4..12 devices
		case 1:
			m = distinctSmallNode(t, r, 6+r.IntN(7))
		default:
			m = islandsNode(t, r, 6+r.IntN(7))
		}
		n := len(m.Devices)
		pool := firstN(n).list()
		for _, pol := range []Policy{Tree, Ring} {
			if pol == Ring && n > 9 {
				continue // keep the brute-force ring affordable
			}
			for try := 0; try < 6; try++ {
				size := 2 + r.IntN(n-1)
				p := newProblem(m, pool, pol, size, rules{})
				p.policy.rules().prepare(p) // as branchAndBound does (the ring's ringTop)
				b := p.newClassSearch(p.buildClasses(firstN(n)), 1)
				// decide the classes below c at random
				c := r.IntN(b.nc + 1)
				rest := size
				for d := 0; d < c; d++ {
					if tk := r.IntN(min(len(b.cls[d].members), rest) + 1); tk > 0 {
						b.decide(d, tk, +1)
						rest -= tk
					}
				}
				if b.capFrom[c] < rest {
					continue
				}
				u, _ := b.upper(c, rest, len(b.levels)-1)
				subtrees++
				completions(b, c, rest, func(set bitset) {
					k := bruteKey(m, set.list(), pool, pol)
					if k.cmp(u) > 0 {
						t.Fatalf("graph %d (%d devices) %s N=%d, decided %v below class %d: set %v scores %v, above the bound %v",
							g, n, pol, size, b.take[:c], c, set.list(), k, u)
					}
				})
			}
		}
	}
	t.Logf("%d subtrees, every completion within the bound", subtrees)
}

// completions calls f with every set of the subtree: the decided members
// and r more, each class from c on giving its first members.
func completions(b *classSearch, c, r int, f func(bitset)) {
	if r == 0 {
		f(b.setMask)
		return
	}
	if c == b.nc {
		return
	}
	for tk := min(len(b.cls[c].members), r); tk >= 0; tk-- {
		b.decide(c, tk, +1)
		completions(b, c+1, r-tk, f)
		b.decide(c, tk, -1)
	}
}

// distinctSmallNode is newDistinctNode at a few devices: every link a
// different bandwidth, so each device is a class of its own and the
// components over the fastest links are small.
func distinctSmallNode(t testing.TB, r *rand.Rand, n int) *topology.Model {
	bw := make([]int64, n*n)
	perm := r.Perm(n * n)
	for a := 0; a < n; a++ {
		for b := a + 1; b < n; b++ {
			w := 20000 + int64(perm[a*n+b])*10
			bw[a*n+b], bw[b*n+a] = w, w
		}
	}
	return newFlatNode(t, n, func(a, b int) int64 { return bw[a*n+b] }, func(i int) int { return i % 2 })
}

// islandsNode is a few groups of devices, fast inside (with ties) and
// slow between: the component at the bottleneck is a group.
func islandsNode(t testing.TB, r *rand.Rand, n int) *topology.Model {
	group := make([]int, n)
	groups := 2 + r.IntN(3)
	for i := range group {
		group[i] = r.IntN(groups)
	}
	levels := []int64{100000, 200000, 200000, 300000}
	bw := make([]int64, n*n)
	for a := 0; a < n; a++ {
		for b := a + 1; b < n; b++ {
			w := int64(10000 + 1000*r.IntN(5))
			if group[a] == group[b] {
				w = levels[r.IntN(len(levels))]
			}
			bw[a*n+b], bw[b*n+a] = w, w
		}
	}
	return newFlatNode(t, n, func(a, b int) int64 { return bw[a*n+b] }, func(i int) int { return group[i] % 2 })
}

// treeOptimum is the best tree key of any size devices of m (all of them
// candidates), by exhaustion: the bottleneck and total of every set with
// Kruskal's algorithm (not the search's Prim), then bruteKey for the
// sets that tie the best on both.
func treeOptimum(m *topology.Model, size int) key {
	n := len(m.Devices)
	pool := firstN(n).list()
	type pair struct {
		a, b int
		w    int64
	}
	var firstTwo [2]int64
	var ties [][]int
	parent := make([]int, n)
	var find func(x int) int
	find = func(x int) int {
		if parent[x] != x {
			parent[x] = find(parent[x])
		}
		return parent[x]
	}
	pairs := make([]pair, 0, size*size)
	combinations(n, size, func(set []int) {
		pairs = pairs[:0]
		var total int64
		for i, a := range set {
			for _, b := range set[i+1:] {
				w := m.BW(a, b)
				pairs = append(pairs, pair{a, b, w})
				total += w
			}
		}
		bn := int64(0)
		if size >= 2 {
			slices.SortFunc(pairs, func(x, y pair) int { return cmp.Compare(y.w, x.w) })
			for _, v := range set {
				parent[v] = v
			}
			joined := 1
			for _, pr := range pairs {
				if x, y := find(pr.a), find(pr.b); x != y {
					parent[x] = y
					if joined++; joined == size {
						bn = pr.w
						break
					}
				}
			}
		}
		ft := [2]int64{bn, total}
		switch {
		case len(ties) > 0 && (ft[0] < firstTwo[0] || ft[0] == firstTwo[0] && ft[1] < firstTwo[1]):
		case len(ties) > 0 && ft == firstTwo:
			ties = append(ties, slices.Clone(set))
		default:
			firstTwo, ties = ft, [][]int{slices.Clone(set)}
		}
	})
	var best key
	for i, set := range ties {
		if k := bruteKey(m, set, pool, Tree); i == 0 || k.cmp(best) > 0 {
			best = k
		}
	}
	return best
}

// On random nodes of 17-24 devices, beyond what the search enumerates,
// with budgets too small to finish: the reported gap is honest (the
// optimum, by exhaustion, is at most the reported bound on the gap's
// term, so the true shortfall is at most Gap) and the bound at the root
// is at least the optimum. The tree policy; the ring's terms are
// TestSelectAgainstExhaustion's.
func TestTreeGapHonest(t *testing.T) {
	r := rand.New(rand.NewPCG(25, 3))
	graphs := 18
	if testing.Short() {
		graphs = 4
	}
	cut, sumGap, sumShort := 0, 0.0, 0.0
	for g := 0; g < graphs; g++ {
		n := 17 + r.IntN(8)
		var m *topology.Model
		switch g % 3 {
		case 0:
			m = randomNode(t, r, n)
			for i := range m.Devices {
				m.Devices[i].Busy = false
			}
		case 1:
			m = distinctSmallNode(t, r, n)
		default:
			m = islandsNode(t, r, n)
		}
		for _, size := range []int{2, 3, 4, n - 3, n - 2, n - 1} {
			opt := treeOptimum(m, size)
			p := newProblem(m, firstN(n).list(), Tree, size, rules{})
			b := p.newClassSearch(p.buildClasses(firstN(n)), 1)
			root, _ := b.upper(0, size, len(b.levels)-1)
			if opt.cmp(root) > 0 {
				t.Errorf("graph %d (%d devices) N=%d: optimum %v above the root's bound %v", g, n, size, opt, root)
			}
			want := p.score(opt)
			for _, work := range []int{20, 60, 200} {
				name := fmt.Sprintf("graph %d (%d devices) N=%d, %d units", g, n, size, work)
				ch, err := Select(m, Request{N: size, Work: work, Budget: time.Hour}, Tree)
				if err != nil {
					t.Fatal(err)
				}
				if ch.Exact {
					if ch.Score.Compare(want) != 0 {
						t.Errorf("%s: exact %s, optimum %s", name, ch.Score, want)
					}
					continue
				}
				cut++
				gi := slices.IndexFunc(ch.Score.Terms, func(x Term) bool { return x.Name == ch.GapTerm })
				if gi < 0 {
					t.Fatalf("%s: gap term %q not in %s", name, ch.GapTerm, ch.Score)
				}
				if c := (Score{Terms: want.Terms[:gi]}).Compare(Score{Terms: ch.Score.Terms[:gi]}); c != 0 {
					if c > 0 {
						t.Errorf("%s: optimum %s beats %s before the gap term %s", name, want, ch.Score, ch.GapTerm)
					}
					continue // the optimum is the choice up to there: no shortfall on the gap term
				}
				o, got := want.Terms[gi].Natural(), ch.Score.Terms[gi].Natural()
				short := 0.0
				if o != 0 {
					short = (o - got) / o
					if want.Terms[gi].Less {
						short = (got - o) / o
					}
				}
				beyond := o > ch.Bound
				if want.Terms[gi].Less {
					beyond = o < ch.Bound
				}
				if beyond || short > ch.Gap+1e-12 {
					t.Errorf("%s: optimum %s %v beyond the bound %v (chosen %v): shortfall %.4f, gap %.4f", name, ch.GapTerm, o, ch.Bound, got, short, ch.Gap)
				}
				sumGap += ch.Gap
				sumShort += short
			}
		}
	}
	if cut == 0 {
		t.Fatal("no search was cut short: the test checks nothing")
	}
	t.Logf("%d cut-short searches, every gap honest; mean reported gap %.2f%%, mean true shortfall %.2f%%", cut, 100*sumGap/float64(cut), 100*sumShort/float64(cut))
}

// On the 128 and 256 all-distinct benchmark nodes at the default work
// (deterministic: the budget counts work), the tree's reported gap on
// the total is a few percent or the choice is proven (issue 25: it was
// 25-29% on every one of them). Where the components over links >= the
// proven bottleneck hold few sets, the optimum is known by enumerating
// them (a set of that bottleneck is connected over those links), and the
// true shortfall is at most the gap. The figures were measured on
// 2026-12-02, each asserted with margin.
func TestDistinctTreeGap(t *testing.T) {
	for _, tc := range []struct {
		n, size   int
		exact     bool
		gap       float64 // the most reported gap
		shortfall float64 // the most true shortfall
	}{
		{128, 8, false, 0.02, 0},     // measured: gap 1.62%, shortfall 0
		{128, 64, true, 0, 0},        // proven (was 25.1%)
		{256, 8, false, 0.09, 0.055}, // gap 8.66%, shortfall 5.11% (issue 35 removed the greedy sets of other components: 6.39%, 2.75%; issue 25: gap 28.8%, shortfall 5.1%)
		{256, 128, true, 0, 0},       // proven (was 25.4%)
	} {
		if testing.Short() && tc.n > 128 {
			continue
		}
		name := fmt.Sprintf("n=%d N=%d", tc.n, tc.size)
		m := newDistinctNode(t, tc.n, 11)
		ch, err := Select(m, Request{N: tc.size, Budget: time.Hour}, Tree)
		if err != nil {
			t.Fatal(err)
		}
		total := ch.Score.Terms[1].Natural()
		if ch.Exact != tc.exact || ch.Gap > tc.gap || (!ch.Exact && ch.GapTerm != "total") {
			t.Errorf("%s: exact %v, gap %.4f on %q; want exact %v or a gap on the total of at most %.2f", name, ch.Exact, ch.Gap, ch.GapTerm, tc.exact, tc.gap)
		}
		bn := int64(ch.Score.Terms[0].Value)
		opt, sets, ok := optimumAtBottleneck(m, tc.size, bn, 1_000_000)
		if !ok {
			t.Logf("%s: too many sets of bottleneck %d to enumerate; gap %.4f", name, bn, ch.Gap)
			continue
		}
		if sets == 0 {
			t.Fatalf("%s: no set of %d devices reaches the chosen bottleneck %d", name, tc.size, bn)
		}
		short := float64(opt-int64(total)) / float64(opt)
		if short < 0 || short > ch.Gap+1e-12 || short > tc.shortfall+1e-12 {
			t.Errorf("%s: optimum total %d over %d sets, chosen %v: shortfall %.4f, gap %.4f (at most %.2f)", name, opt, sets, total, short, ch.Gap, tc.shortfall)
		}
		t.Logf("%s: exact %v gap %.4f, optimum %d of %d sets, shortfall %.4f", name, ch.Exact, ch.Gap, opt, sets, short)
	}
}

// optimumAtBottleneck is the best total of a set of size devices of m
// whose tree bottleneck is at least bn, by enumerating the size-subsets
// of each component over links >= bn (every such set lies in one), and
// how many such sets there are; ok is false when the components hold
// more than limit subsets.
func optimumAtBottleneck(m *topology.Model, size int, bn int64, limit int) (best int64, sets int, ok bool) {
	n := len(m.Devices)
	seen := make([]bool, n)
	var comps [][]int
	count := 0
	for s := 0; s < n; s++ {
		if seen[s] {
			continue
		}
		comp := []int{s}
		seen[s] = true
		for i := 0; i < len(comp); i++ {
			for v := 0; v < n; v++ {
				if !seen[v] && m.BW(comp[i], v) >= bn {
					seen[v] = true
					comp = append(comp, v)
				}
			}
		}
		if len(comp) >= size {
			comps = append(comps, comp)
			c := 1
			for i := 0; i < len(comp)-size; i++ {
				// C(len, size) = C(len, len-size), bounded as it grows
				c = c * (len(comp) - i) / (i + 1)
				if c > limit {
					return 0, 0, false
				}
			}
			if count += c; count > limit {
				return 0, 0, false
			}
		}
	}
	set := make([]int, size)
	for _, comp := range comps {
		combinations(len(comp), size, func(c []int) {
			for i, x := range c {
				set[i] = comp[x]
			}
			if setTree(m, set) < bn {
				return
			}
			sets++
			var tot int64
			for i, a := range set {
				for _, b := range set[i+1:] {
					tot += m.BW(a, b)
				}
			}
			best = max(best, tot)
		})
	}
	return best, sets, true
}
