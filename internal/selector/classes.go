package selector

import (
	"math"
	"math/bits"
	"slices"
	"sort"
)

// class is a group of interchangeable candidates: the same link to every
// other candidate, the same NUMA node and busy state. Members of a class
// of three or more share one internal bandwidth (the relation is
// transitive, so all their mutual links are equal).
type class struct {
	members []int // local indices sorted by (load, index)
	inner   int64 // bandwidth between two members (0 for a single one)
	numa    int
	busy    bool
	// firstMask[m] and firstLoad[m] are the set and summed load of the
	// first m members: the members a set that takes m of the class uses.
	firstMask []uint64
	firstLoad []int64
}

// buildClasses groups the candidates in pool into classes, ordered by
// their lowest index.
func (p *problem) buildClasses(pool uint64) []class {
	var cls []class
	var rep []int
	n := p.n
	for m := pool; m != 0; m &= m - 1 {
		v := bits.TrailingZeros64(m)
		found := -1
		for c, r := range rep {
			if p.numa[r] != p.numa[v] || (p.busy>>uint(r))&1 != (p.busy>>uint(v))&1 {
				continue
			}
			same := true
			for o := pool; o != 0; o &= o - 1 {
				u := bits.TrailingZeros64(o)
				if u != r && u != v && p.bw[r*n+u] != p.bw[v*n+u] {
					same = false
					break
				}
			}
			if same {
				found = c
				break
			}
		}
		if found < 0 {
			rep = append(rep, v)
			cls = append(cls, class{numa: p.numa[v], busy: (p.busy>>uint(v))&1 == 1})
			found = len(cls) - 1
		}
		cls[found].members = append(cls[found].members, v)
	}
	for c := range cls {
		cl := &cls[c]
		if len(cl.members) > 1 {
			cl.inner = p.bw[cl.members[0]*n+cl.members[1]]
		}
		sort.SliceStable(cl.members, func(i, j int) bool {
			a, b := cl.members[i], cl.members[j]
			if p.load[a] != p.load[b] {
				return p.load[a] < p.load[b]
			}
			return a < b
		})
		cl.firstMask = make([]uint64, len(cl.members)+1)
		cl.firstLoad = make([]int64, len(cl.members)+1)
		for i, v := range cl.members {
			cl.firstMask[i+1] = cl.firstMask[i] | 1<<uint(v)
			cl.firstLoad[i+1] = cl.firstLoad[i] + p.load[v]
		}
	}
	return cls
}

// classGraph is the candidates seen class by class: the bandwidth between
// a member of one class and a member of another, and a set as how many
// members each class gives.
type classGraph struct {
	cls []class
	nc  int     // number of classes
	bw  []int64 // nc*nc; bw[c*nc+c] is class c's internal bandwidth
}

func newClassGraph(p *problem, cls []class) classGraph {
	nc := len(cls)
	g := classGraph{cls: cls, nc: nc, bw: make([]int64, nc*nc)}
	for c := range cls {
		for d := range cls {
			if c == d {
				g.bw[c*nc+d] = cls[c].inner
			} else {
				g.bw[c*nc+d] = p.bw[cls[c].members[0]*p.n+cls[d].members[0]]
			}
		}
	}
	return g
}

func (g *classGraph) link(c, d int) int64 { return g.bw[c*g.nc+d] }

// treeOf is the widest-spanning-tree bottleneck of the set that takes
// take[c] members of each class in present: the class graph's own
// bottleneck, and for each class with two or more members the best link
// that can join them (their own, or through another class).
func (g *classGraph) treeOf(present, take []int) int64 {
	bn := int64(math.MaxInt64)
	// Prim over present classes.
	if len(present) > 1 {
		var best [MaxCandidates]int64
		var in [MaxCandidates]bool
		for i := 1; i < len(present); i++ {
			best[i] = g.link(present[0], present[i])
		}
		for step := 1; step < len(present); step++ {
			sel, sv := -1, int64(-1)
			for i := 1; i < len(present); i++ {
				if !in[i] && best[i] > sv {
					sel, sv = i, best[i]
				}
			}
			in[sel] = true
			bn = min(bn, sv)
			for i := 1; i < len(present); i++ {
				if w := g.link(present[sel], present[i]); !in[i] && w > best[i] {
					best[i] = w
				}
			}
		}
	}
	for _, c := range present {
		if take[c] < 2 {
			continue
		}
		j := g.link(c, c)
		for _, d := range present {
			if d != c {
				j = max(j, g.link(c, d))
			}
		}
		bn = min(bn, j)
	}
	return bn
}

// minDegree is the smallest weighted degree of a device of the set.
func (g *classGraph) minDegree(present, take []int) int64 {
	best := int64(math.MaxInt64)
	for _, c := range present {
		deg := int64(take[c]-1) * g.link(c, c)
		for _, d := range present {
			if d != c {
				deg += int64(take[d]) * g.link(c, d)
			}
		}
		best = min(best, deg)
	}
	return best
}

// ringOf is the best ring bottleneck of the set of size devices that
// takes take[c] members of each class in present. exact is false when a
// threshold above the answer could not be decided; ub is then the highest
// such threshold.
func (g *classGraph) ringOf(present, take []int, size int) (ring int64, exact bool, ub int64) {
	if size == 2 {
		if len(present) == 1 {
			return g.link(present[0], present[0]), true, 0
		}
		return g.link(present[0], present[1]), true, 0
	}
	var vals []int64
	for i, c := range present {
		if take[c] >= 2 {
			vals = append(vals, g.link(c, c))
		}
		for _, d := range present[i+1:] {
			vals = append(vals, g.link(c, d))
		}
	}
	slices.Sort(vals)
	vals = slices.Compact(vals)
	exact, ub = true, -1
	// Descending rather than a binary search: an undecided threshold must
	// not hide a decided one below it.
	for i := len(vals) - 1; i >= 0; i-- {
		ok, decided := g.hamAt(present, take, size, vals[i])
		if !decided {
			if exact {
				ub = vals[i]
			}
			exact = false
			continue
		}
		if ok {
			return vals[i], exact, ub
		}
	}
	return 0, exact, ub
}

// hamStates caps the state space of the class-level ring search.
const hamStates = 1 << 20

// hamAt decides whether the set (take[c] members of each class in
// present, size in all) has a Hamiltonian cycle over links of at least t.
// Members of a class are twins: a cycle visits a class in runs, each run
// a path inside the class (which needs the class's own link >= t when
// longer than one device). A dynamic program over how many runs each
// class has had settles it; decided is false when that program would be
// too large.
func (g *classGraph) hamAt(present, take []int, size int, t int64) (ok, decided bool) {
	if len(present) == 1 {
		return g.link(present[0], present[0]) >= t, true
	}
	// degrees and Dirac's condition
	minDeg := math.MaxInt
	for _, c := range present {
		deg := 0
		if g.link(c, c) >= t {
			deg += take[c] - 1
		}
		for _, d := range present {
			if d != c && g.link(c, d) >= t {
				deg += take[d]
			}
		}
		if deg < 2 {
			return false, true
		}
		minDeg = min(minDeg, deg)
	}
	if 2*minDeg >= size {
		return true, true
	}
	// connectivity over classes
	seen := uint64(1)
	stack := []int{0}
	for len(stack) > 0 {
		i := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for j, d := range present {
			if seen>>uint(j)&1 == 0 && g.link(present[i], d) >= t {
				seen |= 1 << uint(j)
				stack = append(stack, j)
			}
		}
	}
	if bits.OnesCount64(seen) != len(present) {
		return false, true
	}
	// DP over run counts: radix hi_c+1 per present class.
	np := len(present)
	hi := make([]int, np)
	radix := make([]int, np)
	states := 1
	for i, c := range present {
		hi[i] = take[c]
		radix[i] = states
		if states > hamStates/(hi[i]+1)/np {
			return false, false
		}
		states *= hi[i] + 1
	}
	adj := make([]uint64, np)
	for i, c := range present {
		for j, d := range present {
			if i != j && g.link(c, d) >= t {
				adj[i] |= 1 << uint(j)
			}
		}
	}
	reach := make([]uint64, states) // bitmask of the last class
	reach[radix[0]] = 1             // one run of the start class
	for s := 0; s < states; s++ {
		last := reach[s]
		if last == 0 {
			continue
		}
		for l := last; l != 0; l &= l - 1 {
			a := bits.TrailingZeros64(l)
			for nx := adj[a]; nx != 0; nx &= nx - 1 {
				j := bits.TrailingZeros64(nx)
				if (s/radix[j])%(hi[j]+1) >= hi[j] {
					continue
				}
				reach[s+radix[j]] |= 1 << uint(j)
			}
		}
	}
	// Accept end states: class c has exactly take[c] runs, or 1..take[c]
	// runs when its own link allows runs longer than one device.
	var rec func(i, s int) bool
	rec = func(i, s int) bool {
		if i == np {
			return reach[s]&adj[0] != 0
		}
		c := present[i]
		lo := hi[i]
		if g.link(c, c) >= t {
			lo = 1
		}
		for k := lo; k <= hi[i]; k++ {
			if rec(i+1, s+k*radix[i]) {
				return true
			}
		}
		return false
	}
	// The cycle starts with a run of present[0] and closes back to it
	// from another class; that first run counts among its runs.
	return rec(0, 0), true
}

// ringLarge scores a ring over more than 16 devices through classes.
func (p *problem) ringLarge(mask uint64) (ring, cut int64, exact bool) {
	g := newClassGraph(p, p.buildClasses(mask))
	take := make([]int, g.nc)
	present := make([]int, g.nc)
	for c := range g.cls {
		take[c] = len(g.cls[c].members)
		present[c] = c
	}
	ring, exact, _ = g.ringOf(present, take, bits.OnesCount64(mask))
	return ring, p.minCut(maskList(mask)), exact
}
