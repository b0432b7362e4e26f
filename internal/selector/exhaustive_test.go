package selector

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/amdrun/amdrun/internal/topology"
)

// bestByExhaustion ranks every set of size of m's devices (all of them
// candidates) with bruteKey, the independent scorer, and returns the best
// key (issue 25: an optimum that owes nothing to the search).
func bestByExhaustion(m *topology.Model, size int, pol Policy) key {
	n := len(m.Devices)
	pool := firstN(n).list()
	var best key
	first := true
	combinations(n, size, func(c []int) {
		k := bruteKey(m, c, pool, pol)
		if first || k.cmp(best) > 0 {
			best, first = k, false
		}
	})
	return best
}

// Beyond the 16 devices the search enumerates, on random nodes of 17-20
// devices: with the default work budget the choice scores what the
// exhaustive optimum scores; with a budget too small to finish, the
// reported gap is honest (the optimum is at most the reported bound on
// the gap's term, so the true shortfall is at most Gap).
func TestSelectAgainstExhaustion(t *testing.T) {
	r := rand.New(rand.NewPCG(25, 25))
	graphs := 12
	if testing.Short() {
		graphs = 3
	}
	exact, honest := 0, 0
	for g := 0; g < graphs; g++ {
		m := randomNode(t, r, 17+r.IntN(4))
		for i := range m.Devices {
			m.Devices[i].Busy = false
		}
		n := len(m.Devices)
		for _, pol := range []Policy{Tree, Ring} {
			sizes := []int{2, 3, 4, n - 2, n - 1}
			if pol == Ring {
				sizes = []int{3, 4, 5} // the brute-force ring is a table over subsets
			}
			for _, size := range sizes {
				name := fmt.Sprintf("graph %d (%d devices) %s N=%d", g, n, pol, size)
				pr := newProblem(m, firstN(n).list(), pol, size, rules{})
				want := pr.score(bestByExhaustion(m, size, pol))
				ch, err := Select(m, Request{N: size, Budget: time.Hour}, pol)
				if err != nil {
					t.Fatal(err)
				}
				got := pr.score(bruteKey(m, sortedCopy(ch.Devices), firstN(n).list(), pol))
				if !ch.Exact || got.Compare(want) != 0 || ch.Score.Compare(want) != 0 {
					t.Errorf("%s: chose %v %s (reported %s, exact %v), optimum %s", name, ch.Devices, got, ch.Score, ch.Exact, want)
				} else {
					exact++
				}
				small, err := Select(m, Request{N: size, Work: 20, Budget: time.Hour}, pol)
				if err != nil {
					t.Fatal(err)
				}
				if small.Exact {
					if small.Score.Compare(want) != 0 {
						t.Errorf("%s, 20 units: exact %s, optimum %s", name, small.Score, want)
					}
					continue
				}
				// the optimum does not beat the chosen set before the gap's
				// term, and not the bound on it
				gi := slices.IndexFunc(small.Score.Terms, func(x Term) bool { return x.Name == small.GapTerm })
				if gi < 0 {
					t.Fatalf("%s: gap term %q not in %s", name, small.GapTerm, small.Score)
				}
				pre := Score{Terms: want.Terms[:gi]}
				if c := pre.Compare(Score{Terms: small.Score.Terms[:gi]}); c > 0 {
					t.Errorf("%s, 20 units: optimum %s beats %s before the gap term %s", name, want, small.Score, small.GapTerm)
					continue
				} else if c < 0 {
					honest++
					continue
				}
				if opt, chosen := want.Terms[gi].Natural(), small.Score.Terms[gi].Natural(); (!want.Terms[gi].Less && opt > small.Bound) ||
					(want.Terms[gi].Less && opt < small.Bound) {
					t.Errorf("%s, 20 units: optimum %s %v beyond the bound %v (chosen %v, gap %.3f)", name, small.GapTerm, opt, small.Bound, chosen, small.Gap)
				} else {
					honest++
				}
			}
		}
	}
	t.Logf("%d choices equal to the exhaustive optimum, %d cut-short gaps honest", exact, honest)
}

func sortedCopy(s []int) []int {
	c := slices.Clone(s)
	slices.Sort(c)
	return c
}

// The tree bottleneck by thresholding at any size: the largest link
// value at which some connected part over links >= it holds N devices.
// The choice reaches it on 64-256 all-distinct devices at the default
// budget, where the search itself does not finish.
func TestTreeBottleneckByThresholding(t *testing.T) {
	for _, n := range []int{64, 128, 256} {
		if testing.Short() && n > 64 {
			continue
		}
		m := newDistinctNode(t, n, 11)
		for _, size := range []int{2, 8, n / 2, n - 1} {
			var vals []int64
			for _, l := range m.Links {
				vals = append(vals, l.MaxBandwidth)
			}
			slices.Sort(vals)
			var opt int64
			for i := len(vals) - 1; i >= 0; i-- {
				if largestComponent(m, vals[i]) >= size {
					opt = vals[i]
					break
				}
			}
			ch, err := Select(m, Request{N: size, Budget: time.Hour}, Tree)
			if err != nil {
				t.Fatal(err)
			}
			if got := setTree(m, ch.Devices); got != opt || int64(ch.Score.Terms[0].Value) != opt {
				t.Errorf("n=%d N=%d: bottleneck %d (reported %s), optimum %d", n, size, got, ch.Score.Terms[0], opt)
			}
		}
	}
}

// newTwoIslandNode is a 16-GPU NVLink node of two islands of 8 fully
// linked GPUs, hosts links between them: 150 GB/s inside an island,
// 200 GB/s on 4 pairs of island 0-7 (total 4.40 TB/s) and on 8 pairs of
// island 8-15 (4.60 TB/s), the fast pairs among 5 GPUs so that every
// bottleneck, ring and min cut of an island is the same (issue 35).
func newTwoIslandNode(t testing.TB) *topology.Model {
	fast := map[[2]int]bool{}
	for _, p := range [][2]int{{0, 1}, {0, 2}, {1, 2}, {2, 3}, {8, 9}, {8, 10}, {8, 11}, {9, 10}, {9, 11}, {10, 11}, {10, 12}, {11, 12}} {
		fast[p] = true
	}
	return newFlatNode(t, 16, func(a, b int) int64 {
		switch {
		case a/8 != b/8:
			return 0
		case fast[[2]int{a, b}]:
			return 200000
		}
		return 150000
	}, func(i int) int { return i / 8 })
}

// Issue 35: with 16 candidates every subset is scored whatever the work
// budget, so on two islands of 8 the default work (below C(16,8) =
// 12,870 sets) proves the optimum at N = 7, 8, 9 under both policies,
// the optimum the exhaustive scorer finds; at N=8 it is island 8-15.
func TestSixteenDevicesExactAtDefaultWork(t *testing.T) {
	m := newTwoIslandNode(t)
	for _, pol := range []Policy{Tree, Ring} {
		for _, size := range []int{7, 8, 9} {
			ch, err := Select(m, Request{N: size, Budget: time.Hour}, pol)
			if err != nil {
				t.Fatal(err)
			}
			pr := newProblem(m, firstN(16).list(), pol, size, rules{})
			want := pr.score(bestByExhaustion(m, size, pol))
			if !ch.Exact || ch.Score.Compare(want) != 0 {
				t.Errorf("%s N=%d: %v %s (exact %v, gap %.3f), the optimum scores %s", pol, size, ch.Devices, ch.Score, ch.Exact, ch.Gap, want)
			}
			if size == 8 && !slices.Equal(ch.Devices, []int{8, 9, 10, 11, 12, 13, 14, 15}) {
				t.Errorf("%s N=8: %v %s, want 8-15 (total 4.60 TB/s)", pol, ch.Devices, ch.Score)
			}
		}
	}
}
