package selector

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strings"

	"github.com/amdrun/amdrun/internal/topology"
)

// Score is a set's rank: its terms compare lexicographically, first term
// first, and for every term a bigger Value is better. Terms where smaller
// is better (NUMA nodes, load) are stored negated and printed naturally.
type Score struct {
	Terms []Term
}

// Term is one component of a Score, e.g. {"bottleneck", 100000, "MB/s"}.
type Term struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	Unit  string  `json:"unit,omitempty"`
	// Less says smaller is better for this term: Value holds the
	// negated figure and String prints -Value.
	Less bool `json:"less,omitempty"`
}

// Natural returns the figure as people read it (un-negated).
func (t Term) Natural() float64 {
	if t.Less {
		return -t.Value
	}
	return t.Value
}

// String prints "bottleneck 100000 MB/s".
func (t Term) String() string {
	v := t.Natural()
	var num string
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		num = fmt.Sprintf("%d", int64(v))
	} else {
		num = fmt.Sprintf("%.2f", v)
	}
	if t.Unit == "" {
		return t.Name + " " + num
	}
	return t.Name + " " + num + " " + t.Unit
}

// String prints the terms, "bottleneck 100000 MB/s, total 596000 MB/s, ...".
func (s Score) String() string {
	parts := make([]string, len(s.Terms))
	for i, t := range s.Terms {
		parts[i] = t.String()
	}
	return strings.Join(parts, ", ")
}

// Compare returns +1 when s ranks above o, -1 when below and 0 when they
// tie. Scores of different shapes compare on their common prefix, then
// the longer one wins.
func (s Score) Compare(o Score) int {
	for i := 0; i < len(s.Terms) && i < len(o.Terms); i++ {
		switch a, b := s.Terms[i].Value, o.Terms[i].Value; {
		case a > b:
			return 1
		case a < b:
			return -1
		}
	}
	switch {
	case len(s.Terms) > len(o.Terms):
		return 1
	case len(s.Terms) < len(o.Terms):
		return -1
	}
	return 0
}

// Term returns the term called name and whether it exists.
func (s Score) Term(name string) (Term, bool) {
	for _, t := range s.Terms {
		if t.Name == name {
			return t, true
		}
	}
	return Term{}, false
}

// key is a score in the search's integer form, compared
// lexicographically, bigger better: [link1, link2, -numa, -busy, -load].
// Load is in hundredths of a percent so that sums are exact.
type key [5]int64

func (a key) cmp(b key) int {
	for i := range a {
		if a[i] != b[i] {
			if a[i] > b[i] {
				return 1
			}
			return -1
		}
	}
	return 0
}

// problem is a selection problem over candidates renumbered 0..n-1 in
// ascending device index ("local" indices).
type problem struct {
	policy Policy
	n      int     // candidates
	size   int     // devices wanted
	idx    []int   // local -> device index
	bw     []int64 // n*n, 0 on the diagonal
	numa   []int   // local -> dense NUMA id (unknown -1 is an id too)
	busy   uint64  // mask of busy candidates
	load   []int64 // hundredths of a percent of utilisation plus memory use
	nNUMA  int

	// scratch for the enumeration path
	ham  []uint32
	vals []int64
	sw   []int64
}

func newProblem(m *topology.Model, cands []int, pol Policy, size int) *problem {
	n := len(cands)
	p := &problem{policy: pol, n: n, size: size, idx: cands, bw: make([]int64, n*n),
		numa: make([]int, n), load: make([]int64, n)}
	ids := map[int]int{}
	for i, d := range cands {
		for j := i + 1; j < n; j++ {
			b := m.BW(d, cands[j])
			p.bw[i*n+j], p.bw[j*n+i] = b, b
		}
		dev := &m.Devices[d]
		id, ok := ids[dev.NUMANode]
		if !ok {
			id = len(ids)
			ids[dev.NUMANode] = id
		}
		p.numa[i] = id
		if dev.Busy {
			p.busy |= 1 << uint(i)
		}
		p.load[i] = loadOf(dev)
	}
	p.nNUMA = len(ids)
	return p
}

// loadOf is the device's utilisation plus memory use, in hundredths of a
// percent; unknown (negative) figures count as 0.
func loadOf(d *topology.Device) int64 {
	l := 0.0
	if d.UtilPercent > 0 {
		l += d.UtilPercent
	}
	if d.MemUsedPct > 0 {
		l += d.MemUsedPct
	}
	return int64(math.Round(l * 100))
}

func (p *problem) global(local []int) []int {
	out := make([]int, len(local))
	for i, l := range local {
		out[i] = p.idx[l]
	}
	return out
}

// fullMask is the set of local indices 0..n-1.
func fullMask(n int) uint64 {
	if n >= 64 {
		return ^uint64(0)
	}
	return 1<<uint(n) - 1
}

func maskList(mask uint64) []int {
	out := make([]int, 0, bits.OnesCount64(mask))
	for mask != 0 {
		out = append(out, bits.TrailingZeros64(mask))
		mask &= mask - 1
	}
	return out
}

// score turns a key into the exported form.
func (p *problem) score(k key) Score {
	var t []Term
	if p.size >= 2 {
		for i, name := range p.policy.primaryTerms() {
			t = append(t, Term{Name: name, Value: float64(k[i]), Unit: "MB/s"})
		}
	}
	t = append(t,
		Term{Name: "numa", Value: float64(k[2]), Unit: "nodes", Less: true},
		Term{Name: "busy", Value: float64(k[3]), Unit: "devices", Less: true},
		Term{Name: "load", Value: float64(k[4]) / 100, Unit: "%", Less: true})
	return Score{Terms: t}
}

// --- pair -> set scoring on local index lists ---------------------------

// treeBottleneck is the smallest edge of the widest (maximum) spanning
// tree of vs: the largest bandwidth b such that vs stays connected over
// links of at least b (Prim's algorithm). 0 for fewer than 2 devices.
func (p *problem) treeBottleneck(vs []int) int64 {
	k := len(vs)
	if k < 2 {
		return 0
	}
	var best [MaxCandidates]int64
	var in [MaxCandidates]bool
	n := p.n
	row := vs[0] * n
	for i := 1; i < k; i++ {
		best[i] = p.bw[row+vs[i]]
	}
	in[0] = true
	bneck := int64(math.MaxInt64)
	for step := 1; step < k; step++ {
		sel, sv := -1, int64(-1)
		for i := 1; i < k; i++ {
			if !in[i] && best[i] > sv {
				sel, sv = i, best[i]
			}
		}
		in[sel] = true
		if sv < bneck {
			bneck = sv
		}
		row = vs[sel] * n
		for i := 1; i < k; i++ {
			if !in[i] {
				if b := p.bw[row+vs[i]]; b > best[i] {
					best[i] = b
				}
			}
		}
	}
	return bneck
}

// totalBW sums the bandwidth of every pair of vs.
func (p *problem) totalBW(vs []int) int64 {
	var s int64
	for i, a := range vs {
		row := a * p.n
		for _, b := range vs[i+1:] {
			s += p.bw[row+b]
		}
	}
	return s
}

// numaCount is the number of distinct NUMA nodes of vs.
func (p *problem) numaCount(vs []int) int64 {
	var seen [MaxCandidates]bool
	c := int64(0)
	for _, v := range vs {
		if !seen[p.numa[v]] {
			seen[p.numa[v]] = true
			c++
		}
	}
	return c
}

// ringUpper bounds the best ring of vs: a ring contains a spanning path
// (so at most the tree bottleneck) and gives every device two links (so
// at most each device's second-best link).
func (p *problem) ringUpper(vs []int, tree int64) int64 {
	ub := tree
	if len(vs) < 3 {
		return ub // a "ring" of two is their link
	}
	for _, a := range vs {
		var m1, m2 int64
		row := a * p.n
		for _, b := range vs {
			if b == a {
				continue
			}
			w := p.bw[row+b]
			if w > m1 {
				m1, m2 = w, m1
			} else if w > m2 {
				m2 = w
			}
		}
		if m2 < ub {
			ub = m2
		}
	}
	return ub
}

// ringBottleneck is the bottleneck of the best Hamiltonian cycle through
// vs (at most 16 devices), given an upper bound ub: the largest link
// bandwidth t such that a cycle exists over links of at least t. For two
// devices it is their link; for one, 0.
func (p *problem) ringBottleneck(vs []int, ub int64) int64 {
	k := len(vs)
	switch {
	case k < 2:
		return 0
	case k == 2:
		return p.bw[vs[0]*p.n+vs[1]]
	}
	p.vals = p.linkValues(p.vals[:0], vs, ub)
	return atLeastWeakest(p.vals, func(t int64) bool { return p.hamCycle(vs, t) })
}

// atLeastWeakest is largestFeasible over link values whose weakest is
// known to be feasible (a complete graph has every ring and path over
// it): vals[0] without calling ok on it.
func atLeastWeakest(vals []int64, ok func(int64) bool) int64 {
	if t, found := largestFeasible(vals[1:], ok); found {
		return t
	}
	return vals[0]
}

// linkValues appends to vals the distinct bandwidths of the links among
// vs that are at most ub, ascending.
func (p *problem) linkValues(vals []int64, vs []int, ub int64) []int64 {
	for i, a := range vs {
		row := a * p.n
		for _, b := range vs[i+1:] {
			if w := p.bw[row+b]; w <= ub {
				vals = append(vals, w)
			}
		}
	}
	slices.Sort(vals)
	return slices.Compact(vals)
}

// largestFeasible returns the largest of the ascending values for which
// ok holds, where ok is monotone (true up to some value, false above it),
// and whether there is one; it calls ok O(log len(vals)) times.
func largestFeasible(vals []int64, ok func(int64) bool) (int64, bool) {
	lo, hi := -1, len(vals)-1 // vals[lo] feasible; lo = -1: none found yet
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if ok(vals[mid]) {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	if lo < 0 {
		return 0, false
	}
	return vals[lo], true
}

// hamCycle reports whether vs (3..16 devices) has a Hamiltonian cycle over
// links of at least t. dp[S] is the set of end devices of paths that
// start at vs[0] and visit exactly {vs[0]} ∪ S (S over vs[1:]).
func (p *problem) hamCycle(vs []int, t int64) bool {
	k := len(vs)
	var adj [16]uint32
	for i, a := range vs {
		row := a * p.n
		for j, b := range vs {
			if i != j && p.bw[row+b] >= t {
				adj[i] |= 1 << uint(j)
			}
		}
	}
	full := uint32(1)<<uint(k) - 2 // bits 1..k-1
	size := 1 << uint(k-1)
	if cap(p.ham) < size {
		p.ham = make([]uint32, size)
	}
	dp := p.ham[:size]
	// S is stored shifted: index S>>1.
	dp[0] = 1
	for s := uint32(2); s <= full; s += 2 {
		var ends uint32
		for r := s; r != 0; r &= r - 1 {
			v := bits.TrailingZeros32(r)
			if adj[v]&dp[(s&^(1<<uint(v)))>>1] != 0 {
				ends |= 1 << uint(v)
			}
		}
		dp[s>>1] = ends
	}
	return dp[full>>1]&adj[0] != 0
}

// minCut is the global minimum cut of vs under link bandwidths
// (Stoer-Wagner). For two devices it is their link; for one, 0.
func (p *problem) minCut(vs []int) int64 {
	k := len(vs)
	if k < 2 {
		return 0
	}
	if cap(p.sw) < k*k {
		p.sw = make([]int64, k*k)
	}
	w := p.sw[:k*k]
	for i, a := range vs {
		for j, b := range vs {
			w[i*k+j] = p.bw[a*p.n+b]
		}
	}
	return stoerWagner(w, k)
}

// stoerWagner returns the global min cut of the k-vertex graph with
// symmetric weights w (k*k, destroyed).
func stoerWagner(w []int64, k int) int64 {
	var act [MaxCandidates]int
	for i := 0; i < k; i++ {
		act[i] = i
	}
	best := int64(math.MaxInt64)
	var wsum [MaxCandidates]int64
	var added [MaxCandidates]bool
	for nv := k; nv > 1; nv-- {
		for i := 0; i < nv; i++ {
			wsum[i], added[i] = 0, false
		}
		prev, last := -1, -1
		for step := 0; step < nv; step++ {
			sel := -1
			for i := 0; i < nv; i++ {
				if !added[i] && (sel < 0 || wsum[i] > wsum[sel]) {
					sel = i
				}
			}
			added[sel] = true
			if step == nv-1 {
				if wsum[sel] < best {
					best = wsum[sel]
				}
				last = sel
				break
			}
			prev = sel
			row := act[sel] * k
			for i := 0; i < nv; i++ {
				if !added[i] {
					wsum[i] += w[row+act[i]]
				}
			}
		}
		// merge last into prev
		a, b := act[prev], act[last]
		for i := 0; i < nv; i++ {
			c := act[i]
			w[a*k+c] += w[b*k+c]
			w[c*k+a] = w[a*k+c]
		}
		act[last] = act[nv-1]
	}
	return best
}

// evalSet scores the set vs (sorted local indices) exactly. Rings of more
// than 16 devices go through the class-based evaluation.
func (p *problem) evalSet(vs []int) key {
	var k key
	mask := listMask(vs)
	if len(vs) >= 2 {
		if p.policy == Ring {
			if len(vs) > enumLimit {
				k[0], k[1], _ = p.ringLarge(mask)
			} else {
				t := p.treeBottleneck(vs)
				k[0] = p.ringBottleneck(vs, p.ringUpper(vs, t))
				k[1] = p.minCut(vs)
			}
		} else {
			k[0] = p.treeBottleneck(vs)
			k[1] = p.totalBW(vs)
		}
	}
	p.tieBreaks(&k, vs, mask)
	return k
}

// tieBreaks fills the terms every policy ranks by after its own: fewest
// NUMA nodes, fewest busy devices, least load.
func (p *problem) tieBreaks(k *key, vs []int, mask uint64) {
	k[2] = -p.numaCount(vs)
	k[3] = -int64(bits.OnesCount64(mask & p.busy))
	var l int64
	for _, v := range vs {
		l += p.load[v]
	}
	k[4] = -l
}

func listMask(vs []int) uint64 {
	var mask uint64
	for _, v := range vs {
		mask |= 1 << uint(v)
	}
	return mask
}

func (p *problem) evalMask(mask uint64) key {
	var buf [MaxCandidates]int
	vs := buf[:0]
	for m := mask; m != 0; m &= m - 1 {
		vs = append(vs, bits.TrailingZeros64(m))
	}
	return p.evalSet(vs)
}
