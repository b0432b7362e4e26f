package selector

import (
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/amdrun/amdrun/internal/topology"
)

// randomNode builds a node of n devices in random "GPUs" (groups whose
// members are often interchangeable), with random bandwidths that include
// ties and missing links, random NUMA nodes, busy flags and load.
func randomNode(t testing.TB, r *rand.Rand, n int) *topology.Model {
	levels := []int64{0, 50000, 50000, 100000, 200000, 400000}
	groups := 1 + r.IntN(n)
	group := make([]int, n)
	for i := range group {
		group[i] = r.IntN(groups)
	}
	gw := make([][]int64, groups)
	for g := range gw {
		gw[g] = make([]int64, groups)
	}
	for g := 0; g < groups; g++ {
		for h := g; h < groups; h++ {
			w := levels[r.IntN(len(levels))]
			gw[g][h], gw[h][g] = w, w
		}
	}
	noise := r.IntN(3) // 0: pure groups (many classes) .. 2: noisy
	gnuma := make([]int, groups)
	for g := range gnuma {
		gnuma[g] = r.IntN(3) - 1
	}
	bw := make([][]int64, n)
	for i := range bw {
		bw[i] = make([]int64, n)
	}
	for a := 0; a < n; a++ {
		for b := a + 1; b < n; b++ {
			w := gw[group[a]][group[b]]
			if noise > 0 && r.IntN(6) < noise {
				w = levels[r.IntN(len(levels))]
			}
			bw[a][b], bw[b][a] = w, w
		}
	}
	m := newFlatNode(t, n, func(a, b int) int64 { return bw[a][b] }, func(i int) int {
		if noise == 2 && r.IntN(4) == 0 {
			return r.IntN(3) - 1
		}
		return gnuma[group[i]]
	})
	for i := range m.Devices {
		d := &m.Devices[i]
		switch r.IntN(8) {
		case 0:
			d.Busy, d.BusyReason = true, "test"
		case 1:
			d.UtilPercent = float64(r.IntN(3)) * 12.5
		case 2:
			d.MemUsedPct = 1.25
		}
	}
	return m
}

// bruteKey scores a set with straightforward, independent algorithms.
func bruteKey(m *topology.Model, set []int, pol Policy) key {
	var k key
	bw := func(i, j int) int64 { return m.BW(set[i], set[j]) }
	n := len(set)
	if n >= 2 {
		if pol == Tree {
			// Kruskal-style: largest t with the set connected over links >= t
			best := int64(0)
			for i := 0; i < n; i++ {
				for j := i + 1; j < n; j++ {
					t := bw(i, j)
					if t > best && connectedAt(n, bw, t) {
						best = t
					}
				}
			}
			k[0] = best
			for i := 0; i < n; i++ {
				for j := i + 1; j < n; j++ {
					k[1] += bw(i, j)
				}
			}
		} else {
			k[0] = bruteRing(n, bw)
			k[1] = bruteCut(n, bw)
		}
	}
	numa := map[int]bool{}
	for _, d := range set {
		dev := &m.Devices[d]
		numa[dev.NUMANode] = true
		if dev.Busy {
			k[3]--
		}
		k[4] -= loadOf(dev)
	}
	k[2] = -int64(len(numa))
	return k
}

func connectedAt(n int, bw func(i, j int) int64, t int64) bool {
	seen := 1
	for changed := true; changed; {
		changed = false
		for i := 0; i < n; i++ {
			if seen>>i&1 == 0 {
				continue
			}
			for j := 0; j < n; j++ {
				if seen>>j&1 == 0 && bw(i, j) >= t {
					seen |= 1 << j
					changed = true
				}
			}
		}
	}
	return seen == 1<<n-1
}

// bruteRing: max over Hamiltonian cycles of the weakest link, by a
// max-min dynamic program over (visited, last) from device 0.
func bruteRing(n int, bw func(i, j int) int64) int64 {
	if n == 2 {
		return bw(0, 1)
	}
	dp := make([][]int64, 1<<n)
	for s := range dp {
		dp[s] = make([]int64, n)
		for v := range dp[s] {
			dp[s][v] = -1
		}
	}
	dp[1][0] = math.MaxInt64
	for s := 1; s < 1<<n; s += 2 {
		for v := 0; v < n; v++ {
			if dp[s][v] < 0 {
				continue
			}
			for w := 0; w < n; w++ {
				if s>>w&1 == 0 {
					if c := min(dp[s][v], bw(v, w)); c > dp[s|1<<w][w] {
						dp[s|1<<w][w] = c
					}
				}
			}
		}
	}
	best := int64(0)
	for v := 1; v < n; v++ {
		if d := dp[1<<n-1][v]; d >= 0 {
			best = max(best, min(d, bw(v, 0)))
		}
	}
	return best
}

// bruteCut: the lightest cut over every bipartition.
func bruteCut(n int, bw func(i, j int) int64) int64 {
	best := int64(math.MaxInt64)
	for s := 1; s < 1<<(n-1); s++ {
		var c int64
		for i := 0; i < n; i++ {
			for j := 0; j < n; j++ {
				if s>>i&1 == 1 && s>>j&1 == 0 {
					c += bw(i, j)
				}
			}
		}
		best = min(best, c)
	}
	return best
}

// bruteTop ranks every subset of size of all devices, or with cls only
// the canonical ones (each class giving its first members, the sets the
// class search reports).
func bruteTop(m *topology.Model, size, k int, pol Policy, cls []class) []entry {
	t := &topK{k: k}
	n := len(m.Devices)
	for mask := uint64(1); mask < 1<<n; mask++ {
		if bits.OnesCount64(mask) != size || !canonical(mask, cls) {
			continue
		}
		t.offer(entry{key: bruteKey(m, maskList(mask), pol), mask: mask})
	}
	return t.e
}

func canonical(mask uint64, cls []class) bool {
	for _, c := range cls {
		all := c.firstMask[len(c.members)]
		if mask&all != c.firstMask[bits.OnesCount64(mask&all)] {
			return false
		}
	}
	return true
}

func sameTop(a, b []entry) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestPropertyFastPathEqualsBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	graphs := 120
	if testing.Short() {
		graphs = 30
	}
	for g := 0; g < graphs; g++ {
		n := 2 + r.IntN(11) // 2..12
		m := randomNode(t, r, n)
		all := make([]int, n)
		for i := range all {
			all[i] = i
		}
		for _, pol := range []Policy{Tree, Ring} {
			if pol == Ring && n > 10 {
				continue // keep the brute-force ring affordable
			}
			for size := 1; size <= n; size++ {
				name := fmt.Sprintf("graph %d n=%d pol=%d size=%d", g, n, pol, size)
				want := bruteTop(m, size, 4, pol, nil)
				p := newProblem(m, all, pol, size)
				if got := p.enumerate(4); !sameTop(got.top, want) {
					t.Fatalf("%s: enumeration %v, brute force %v", name, got.top, want)
				}
				p = newProblem(m, all, pol, size)
				got := p.branchAndBound(4, time.Minute)
				if !got.exact {
					t.Fatalf("%s: branch-and-bound not exact", name)
				}
				// Beyond enumeration, runner-ups are canonical sets only
				// (no swaps of interchangeable devices); the best is the same.
				canon := bruteTop(m, size, 4, pol, p.buildClasses(1<<n-1))
				if !sameTop(got.top, canon) || got.top[0] != want[0] {
					t.Fatalf("%s: branch-and-bound %v, brute force %v (canonical %v)", name, got.top, want, canon)
				}
			}
		}
	}
}

// Select's public path agrees with Policy.Score on what it returns.
func TestSelectScoresMatchPolicyScore(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for g := 0; g < 20; g++ {
		m := randomNode(t, r, 3+r.IntN(8))
		for _, p := range []Policy{Tree, Ring} {
			ch, err := Select(m, Request{N: 1 + r.IntN(3), AllowBusy: true}, p)
			if err != nil {
				t.Fatal(err)
			}
			if s := p.Score(m, ch.Devices); s.Compare(ch.Score) != 0 {
				t.Errorf("graph %d %s: Select %s, Score %s", g, p.Name(), ch.Score, s)
			}
			for _, a := range ch.Alternatives {
				if a.Score.Compare(ch.Score) > 0 {
					t.Errorf("graph %d %s: alternative %v beats the choice", g, p.Name(), a.Devices)
				}
			}
		}
	}
}
