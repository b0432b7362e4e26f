package selector

import (
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/amdrun/amdrun/internal/topology"
)

// randomNode builds a node of n devices in random "GPUs" (groups whose
// members are often interchangeable), with random bandwidths that include
// ties and missing links, random link kinds (XGMI, NVLink, PCIe at every
// level), packages and hives, random NUMA nodes, busy flags and load.
func randomNode(t testing.TB, r *rand.Rand, n int) *topology.Model {
	levels := []int64{0, 50000, 50000, 100000, 200000, 400000}
	pcie := []string{topology.LevelPIX, topology.LevelPXB, topology.LevelPHB, topology.LevelNODE, topology.LevelSYS, ""}
	groups := 1 + r.IntN(n)
	group := make([]int, n)
	for i := range group {
		group[i] = r.IntN(groups)
	}
	gw := make([][]int64, groups)
	gl := make([][]string, groups)
	for g := range gw {
		gw[g], gl[g] = make([]int64, groups), make([]string, groups)
	}
	for g := 0; g < groups; g++ {
		for h := g; h < groups; h++ {
			w := levels[r.IntN(len(levels))]
			l := pcie[r.IntN(len(pcie))]
			gw[g][h], gw[h][g] = w, w
			gl[g][h], gl[h][g] = l, l
		}
	}
	noise := r.IntN(3) // 0: pure groups (many classes) .. 2: noisy
	gnuma := make([]int, groups)
	gpkg := make([]string, groups)
	ghive := make([]string, groups)
	for g := range gnuma {
		gnuma[g] = r.IntN(3) - 1
		if r.IntN(2) == 0 {
			gpkg[g] = fmt.Sprintf("pkg%d", g)
		}
		ghive[g] = []string{"", "h0", "h1"}[r.IntN(3)]
	}
	fabric := topology.LinkXGMI
	if r.IntN(2) == 0 {
		fabric = topology.LinkNVLink
	}
	m := &topology.Model{Source: "test random"}
	numaSeen := map[int]bool{}
	for i := 0; i < n; i++ {
		nn := gnuma[group[i]]
		if noise == 2 && r.IntN(4) == 0 {
			nn = r.IntN(3) - 1
		}
		m.Devices = append(m.Devices, topology.Device{Index: i, RuntimeIndex: i, NUMANode: nn,
			Package: gpkg[group[i]], Hive: ghive[group[i]]})
		if nn >= 0 && !numaSeen[nn] {
			numaSeen[nn] = true
			m.NUMANodes = append(m.NUMANodes, topology.NUMANode{ID: nn})
		}
	}
	for a := 0; a < n; a++ {
		for b := a + 1; b < n; b++ {
			w, l := gw[group[a]][group[b]], gl[group[a]][group[b]]
			if noise > 0 && r.IntN(6) < noise {
				w, l = levels[r.IntN(len(levels))], pcie[r.IntN(len(pcie))]
			}
			if w > 0 {
				m.Links = append(m.Links, topology.Link{A: a, B: b, Type: fabric, MinBandwidth: w, MaxBandwidth: w, Direct: true})
			} else if r.IntN(3) > 0 {
				// a PCIe path the source labels (Finish assumes its
				// bandwidth from the level); unlabelled pairs are left to
				// Finish
				m.Links = append(m.Links, topology.Link{A: a, B: b, Type: topology.LinkPCIe, Level: l})
			}
		}
	}
	if err := m.Finish(); err != nil {
		t.Fatal(err)
	}
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

// cubeMeshNode builds an 8-GPU NVLink hybrid cube mesh like the DGX-1:
// GPUs 0-3 and 4-7 each fully linked, GPU i linked to i+4, each link
// one or two NVLinks at random; every other pair crosses the host, on
// NUMA node i/4.
func cubeMeshNode(t testing.TB, r *rand.Rand) *topology.Model {
	m := &topology.Model{Source: "test cube mesh", Vendor: topology.VendorNVIDIA,
		NUMANodes: []topology.NUMANode{{ID: 0}, {ID: 1}}}
	for i := 0; i < 8; i++ {
		m.Devices = append(m.Devices, topology.Device{Index: i, RuntimeIndex: i, NUMANode: i / 4})
	}
	for a := 0; a < 8; a++ {
		for b := a + 1; b < 8; b++ {
			if a/4 == b/4 || b == a+4 {
				c := 1 + r.IntN(2)
				m.Links = append(m.Links, topology.Link{A: a, B: b, Type: topology.LinkNVLink,
					Level: fmt.Sprintf("NV%d", c), Count: c, Direct: true})
			}
		}
	}
	if err := m.Finish(); err != nil {
		t.Fatal(err)
	}
	return m
}

// The tie-break slots bruteKey fills, found by the names in the table
// (terms.go): bruteKey computes each term its own way.
var kNUMA, kBusy, kSplit, kLoad = tieSlot("numa"), tieSlot("busy"), tieSlot("split"), tieSlot("load")

func tieSlot(name string) int {
	for i, t := range defaultTies {
		if t.name == name {
			return kTies + i
		}
	}
	panic("no tie-break term " + name)
}

// bruteKey scores a set with straightforward, independent algorithms;
// pool is every candidate (the set's split is its bandwidth to the rest).
func bruteKey(m *topology.Model, set, pool []int, pol Policy) key {
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
			k[kFirst] = best
		} else {
			k[kFirst] = bruteRing(n, bw)
			k[kCut] = bruteCut(n, bw)
		}
		for i := 0; i < n; i++ {
			for j := i + 1; j < n; j++ {
				k[kTotal] += bw(i, j)
				k[kLocality] += int64(m.Locality(set[i], set[j]))
			}
		}
	}
	numa := map[int]bool{}
	for _, d := range set {
		dev := &m.Devices[d]
		numa[dev.NUMANode] = true
		if dev.Busy {
			k[kBusy]--
		}
		k[kLoad] -= loadOf(dev)
		for _, o := range pool {
			if !slices.Contains(set, o) {
				k[kSplit] -= int64(m.Locality(d, o))
			}
		}
	}
	k[kNUMA] = -int64(len(numa))
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

// bruteTop ranks every subset of size of the candidates cands (local
// indices into cands), or with cls only the canonical ones (each class
// giving its first members, the sets the class search reports).
func bruteTop(m *topology.Model, cands []int, size, k int, pol Policy, cls []class, twinBefore []int) []entry {
	t := &topK{k: k}
	n := len(cands)
	for mask := uint64(1); mask < 1<<n; mask++ {
		set := bitset{mask}
		if bits.OnesCount64(mask) != size || !canonical(set, cls, twinBefore) {
			continue
		}
		var devs []int
		for _, l := range set.list() {
			devs = append(devs, cands[l])
		}
		t.offer(entry{key: bruteKey(m, devs, cands, pol), mask: set})
	}
	return t.e
}

func canonical(mask bitset, cls []class, twinBefore []int) bool {
	counts := make([]int, len(cls))
	for i, c := range cls {
		in := mask
		in.and(&c.firstMask[len(c.members)])
		counts[i] = in.count()
		if in != c.firstMask[counts[i]] {
			return false
		}
	}
	// of two twin classes, the lower gives at least as many
	for c, e := range twinBefore {
		if e >= 0 && counts[c] > counts[e] {
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
	graphs := 160
	if testing.Short() {
		graphs = 40
	}
	for g := 0; g < graphs; g++ {
		var m *topology.Model
		if g%5 == 4 {
			m = cubeMeshNode(t, r)
		} else {
			m = randomNode(t, r, 2+r.IntN(11)) // 2..12 devices
		}
		n := len(m.Devices)
		// Some devices held by another job: they are no candidates, and
		// no part of any set's split.
		var cands []int
		for i := 0; i < n; i++ {
			if n < 4 || r.IntN(6) > 0 {
				cands = append(cands, i)
			}
		}
		nc := len(cands)
		for _, pol := range []Policy{Tree, Ring} {
			if pol == Ring && nc > 10 {
				continue // keep the brute-force ring affordable
			}
			for size := 1; size <= nc; size++ {
				name := fmt.Sprintf("graph %d n=%d candidates %v policy=%s size=%d", g, n, cands, pol, size)
				want := bruteTop(m, cands, size, 4, pol, nil, nil)
				p := newProblem(m, cands, pol, size, rules{})
				if got := p.enumerate(4); !sameTop(got.top, want) || !got.exact {
					t.Fatalf("%s: enumeration %v, brute force %v", name, got.top, want)
				}
				p = newProblem(m, cands, pol, size, rules{})
				got := p.branchAndBound(4)
				if !got.exact {
					t.Fatalf("%s: branch-and-bound not exact", name)
				}
				// Beyond enumeration, runner-ups are canonical sets only
				// (no swaps of interchangeable devices or classes); the
				// best is the same.
				cls := p.buildClasses(firstN(nc))
				twins := p.newClassSearch(cls, 1).twinBefore
				checkTwins(t, m, cands, cls, twins, pol)
				canon := bruteTop(m, cands, size, 4, pol, cls, twins)
				if !sameTop(got.top, canon) || got.top[0] != want[0] {
					t.Fatalf("%s: branch-and-bound %v, brute force %v (canonical %v)", name, got.top, want, canon)
				}
			}
		}
	}
}

// Select's public path agrees with Policy.Score on what it returns, and
// its ring order reaches the ring score.
func TestSelectScoresMatchPolicyScore(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for g := 0; g < 30; g++ {
		m := randomNode(t, r, 3+r.IntN(8))
		if g%3 == 2 {
			m = cubeMeshNode(t, r)
		}
		for _, p := range []Policy{Tree, Ring} {
			req := Request{N: 1 + r.IntN(4), AllowBusy: true}
			if req.N > len(m.Devices) {
				req.N = len(m.Devices)
			}
			ch, err := Select(m, req, p)
			if err != nil {
				t.Fatal(err)
			}
			if s := p.Score(m, req, ch.Devices); s.Compare(ch.Score) != 0 {
				t.Errorf("graph %d %s: Select %s, Score %s", g, p.String(), ch.Score, s)
			}
			for _, a := range ch.Alternatives {
				if a.Score.Compare(ch.Score) > 0 {
					t.Errorf("graph %d %s: alternative %v beats the choice", g, p.String(), a.Devices)
				}
			}
			if p == Ring && req.N >= 3 && ringBottleneckOf(m.BW, ch.Ring) != int64(ch.Score.Terms[0].Value) {
				t.Errorf("graph %d: ring %v does not reach %s", g, ch.Ring, ch.Score)
			}
		}
	}
}

// checkTwins checks that swapping the members of twin classes leaves
// every score unchanged (what lets the search skip such swaps): the
// brute-force key of each set of a few members equals that of its swap.
func checkTwins(t *testing.T, m *topology.Model, cands []int, cls []class, twinBefore []int, pol Policy) {
	t.Helper()
	for c, e := range twinBefore {
		if e < 0 {
			continue
		}
		swap := map[int]int{}
		for i, v := range cls[c].members {
			u := cls[e].members[i]
			swap[cands[v]], swap[cands[u]] = cands[u], cands[v]
		}
		// the set of c's first member with e's other members and one more
		// device, swapped
		set := []int{cands[cls[c].members[0]]}
		for _, u := range cls[e].members[1:] {
			set = append(set, cands[u])
		}
		for _, d := range cands {
			if _, ok := swap[d]; !ok {
				set = append(set, d)
				break
			}
		}
		var swapped []int
		for _, d := range set {
			if s, ok := swap[d]; ok {
				d = s
			}
			swapped = append(swapped, d)
		}
		slices.Sort(set)
		slices.Sort(swapped)
		if a, b := bruteKey(m, set, cands, pol), bruteKey(m, swapped, cands, pol); a != b {
			t.Fatalf("twin classes %d and %d: %v scores %v, swapped %v scores %v", e, c, set, a, swapped, b)
		}
	}
}
