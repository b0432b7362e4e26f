package selector

import (
	"math/bits"
	"slices"
)

// ringRange is what is known of the best ring (Hamiltonian cycle) through
// a set: one with bottleneck lo exists, none has a bottleneck above hi.
type ringRange struct{ lo, hi int64 }

func (r ringRange) exact() bool { return r.lo == r.hi }

// ringOf bounds the best ring through vs (sorted local indices): exactly
// up to 16 devices, by ringSearch beyond. For two devices the "ring" is
// their link; for one, 0.
func (p *problem) ringOf(vs []int) ringRange {
	k := len(vs)
	switch {
	case k < 2:
		return ringRange{}
	case k == 2:
		b := int64(p.bw[vs[0]*p.n+vs[1]])
		return ringRange{b, b}
	case k <= enumLimit: // the largest link value with a ring over links >= it
		p.vals = p.linkValues(p.vals[:0], vs, p.ringUpper(vs, p.treeBottleneck(vs)))
		b := atLeastWeakest(p.vals, func(t int64) bool { return p.hamCycle(vs, t) })
		return ringRange{b, b}
	}
	g := newClassGraph(p, p.buildClasses(setOf(vs)))
	take := make([]int, g.nc)
	present := make([]int, g.nc)
	for c := range g.cls {
		take[c] = len(g.cls[c].members)
		present[c] = c
	}
	return p.ringSearch(&g, present, take, vs)
}

// ringSearch bounds the best ring through the set vs of more than 16
// devices (take[c] members of each class of g in present): a bisection of
// its link values below the degree bound for the highest at which
// findCycle finds a ring (docs/placement.md). The range keeps the degree
// bound as its top; the best cycle found is kept (p.rings), so the ring
// reported is one amdrun holds.
func (p *problem) ringSearch(g *classGraph, present, take, vs []int) ringRange {
	vals := p.linkValues(nil, vs, g.ringUpper(present, take))
	// vals[0], the weakest link, has a ring: the graph is complete
	lo, hi := 0, len(vals)-1
	known := p.rings[setOf(vs)]
	best := known
	// reached moves lo to the weakest link of the ring c (nil: none)
	reached := func(c []int) {
		if c == nil {
			return
		}
		i, _ := slices.BinarySearch(vals, p.cycleBottleneck(c))
		lo = max(lo, min(i, len(vals)-1))
		hi = max(hi, lo)
		if best == nil || p.cycleBottleneck(c) > p.cycleBottleneck(best) {
			best = c
		}
	}
	reached(known)
	for lo < hi && !p.bud.spent() {
		mid := (lo + hi + 1) / 2
		p.bud.spend(1)
		if c := p.findCycle(vs, vals[mid]); c != nil {
			lo = mid
			reached(c)
		} else {
			hi = mid - 1
		}
	}
	if best != nil && (known == nil || p.cycleBottleneck(best) > p.cycleBottleneck(known)) {
		if p.rings == nil {
			p.rings = map[bitset][]int{}
		}
		p.rings[setOf(best)] = best // the ring reported for the set, if chosen
	}
	return ringRange{vals[lo], vals[len(vals)-1]}
}

// ringUpper bounds the best ring of vs: at most the tree bottleneck and
// each device's second-best link.
func (p *problem) ringUpper(vs []int, tree int64) int64 {
	ub := tree
	if len(vs) < 3 {
		return ub // a "ring" of two is their link
	}
	for _, a := range vs {
		var m top2
		for _, b := range vs {
			if b != a {
				m.add(int64(p.bw[a*p.n+b]))
			}
		}
		ub = min(ub, m[1])
	}
	return ub
}

// top2 keeps the two largest values added, largest first.
type top2 [2]int64

func (m *top2) add(w int64) {
	if w > m[0] {
		m[0], m[1] = w, m[0]
	} else if w > m[1] {
		m[1] = w
	}
}

// hamCycle reports whether vs (3..16 devices) has a Hamiltonian cycle over
// links of at least t.
func (p *problem) hamCycle(vs []int, t int64) bool {
	k := len(vs)
	p.bud.spend(1 + int64(k)<<uint(k-1)>>10)
	if cap(p.ham) < 1<<k {
		p.ham = make([]uint32, 1<<k)
	}
	dp := p.ham[:1<<k]
	adj := p.pathEnds(dp, vs, t, true)
	return dp[len(dp)-1]&adj[0] != 0
}

// pathEnds fills dp[S] (S a set of positions of vs) with the positions
// where a path over links >= t through exactly S can end (with
// fromFirst, starting at position 0), and returns those links.
func (p *problem) pathEnds(dp []uint32, vs []int, t int64, fromFirst bool) (adj [enumLimit]uint32) {
	p.adjAtLeast(adj[:], vs, t)
	for s := uint32(1); s < uint32(len(dp)); s++ {
		dp[s] = 0
		if s&(s-1) == 0 {
			if !fromFirst || s == 1 {
				dp[s] = s
			}
		} else if !fromFirst || s&1 == 1 {
			for r := s; r != 0; r &= r - 1 {
				if v := bits.TrailingZeros32(r); adj[v]&dp[s&^(1<<uint(v))] != 0 {
					dp[s] |= 1 << uint(v)
				}
			}
		}
	}
	return adj
}

// adjAtLeast sets in adj[i] the bit of each position j of vs whose link
// to vs[i] is at least t.
func (p *problem) adjAtLeast(adj []uint32, vs []int, t int64) {
	for i, a := range vs {
		row := a * p.n
		for j, b := range vs {
			if i != j && int64(p.bw[row+b]) >= t {
				adj[i] |= 1 << uint(j)
			}
		}
	}
}

// findCycle looks for a Hamiltonian cycle through vs over links >= t by
// extension and rotation (Pósa's method, the next device by Warnsdorff's
// rule). It returns the cycle from vs[0], or nil (which proves nothing)
// when a device has fewer than two such links or the rotations run out
// (8 per device).
func (p *problem) findCycle(vs []int, t int64) []int {
	k := len(vs)
	s := posa{link: func(a, b int) bool { return int64(p.bw[vs[a]*p.n+vs[b]]) >= t }}
	defer func() { p.bud.spend(1 + int64(k*k+s.rotations*k)/1024) }()
	if !s.init(k) {
		return nil
	}
	s.visit(0)
	for {
		end := s.path[len(s.path)-1]
		if next := s.extension(end); next >= 0 {
			s.visit(next)
			continue
		}
		if len(s.path) == k && s.close(end) {
			break
		}
		if s.rotations >= 8*k || !s.rotate(end) {
			return nil
		}
	}
	out := make([]int, k)
	for i, a := range s.path {
		out[i] = vs[a]
	}
	return out
}

// posa is findCycle's path over devices 0..k-1 (positions in vs).
type posa struct {
	link      func(a, b int) bool
	adj       [][]int
	pos       []int // position on the path, -1 when not on it
	free      []int // neighbours not on the path
	path      []int
	rotations int
}

// init lists the links; false when a device has fewer than two.
func (s *posa) init(k int) bool {
	s.adj = make([][]int, k)
	for a := 0; a < k; a++ {
		for b := 0; b < k; b++ {
			if a != b && s.link(a, b) {
				s.adj[a] = append(s.adj[a], b)
			}
		}
		if len(s.adj[a]) < 2 {
			return false
		}
	}
	s.pos, s.free = make([]int, k), make([]int, k)
	for a := range s.pos {
		s.pos[a] = -1
		s.free[a] = len(s.adj[a])
	}
	s.path = make([]int, 0, k)
	return true
}

func (s *posa) visit(a int) {
	s.pos[a] = len(s.path)
	s.path = append(s.path, a)
	for _, b := range s.adj[a] {
		s.free[b]--
	}
}

// reverseFrom reverses path[i..].
func (s *posa) reverseFrom(i int) {
	for l, r := i, len(s.path)-1; l < r; l, r = l+1, r-1 {
		s.path[l], s.path[r] = s.path[r], s.path[l]
	}
	for j := i; j < len(s.path); j++ {
		s.pos[s.path[j]] = j
	}
}

// extension is the end's neighbour off the path with the fewest free
// neighbours (Warnsdorff), or -1.
func (s *posa) extension(end int) int {
	next := -1
	for _, b := range s.adj[end] {
		if s.pos[b] < 0 && (next < 0 || s.free[b] < s.free[next]) {
			next = b
		}
	}
	return next
}

// close makes the full path a cycle: directly, or through a crossing
// (path[i] next to the end, path[i+1] next to the start).
func (s *posa) close(end int) bool {
	k := len(s.path)
	if s.link(end, s.path[0]) {
		return true
	}
	for i := 1; i < k-2; i++ {
		if s.link(s.path[i], end) && s.link(s.path[i+1], s.path[0]) {
			s.reverseFrom(i + 1)
			return true
		}
	}
	return false
}

// rotate reverses path[j+1..] for a neighbour path[j] of the end,
// preferring a new end that can extend (or close), cycling through the
// options; false when there is none.
func (s *posa) rotate(end int) bool {
	s.rotations++
	full := len(s.path) == len(s.pos)
	var opts [2][]int
	for _, b := range s.adj[end] {
		j := s.pos[b]
		if j >= len(s.path)-2 {
			continue
		}
		ne := s.path[j+1]
		good := s.free[ne] > 0 || (full && s.link(ne, s.path[0]))
		opts[boolInt(!good)] = append(opts[boolInt(!good)], j)
	}
	pick := opts[0]
	if len(pick) == 0 {
		pick = opts[1]
	}
	if len(pick) == 0 {
		return false
	}
	s.reverseFrom(pick[s.rotations%len(pick)] + 1)
	return true
}

// cycleBottleneck is the weakest link of the ring c.
func (p *problem) cycleBottleneck(c []int) int64 {
	b := int64(-1)
	for j, v := range c {
		if w := int64(p.bw[v*p.n+c[(j+1)%len(c)]]); b < 0 || w < b {
			b = w
		}
	}
	return b
}

// ringTop bounds the ring of every set of p.size (3 or more) candidates:
// the largest t at which the 2-core of the graph of links >= t has a
// connected part of p.size devices.
func (p *problem) ringTop() int64 {
	all := firstN(p.n).list()
	vals := p.linkValues(nil, all, 1<<62)
	t, _ := largestFeasible(vals, func(t int64) bool {
		adj := p.thresholdGraph(t)
		core := twoCore(adj, firstN(p.n))
		return largestPart(adj, core) >= p.size
	})
	return t
}

// thresholdGraph is the candidates' graph of links >= t (scratch).
func (p *problem) thresholdGraph(t int64) []bitset {
	n := p.n
	if cap(p.tg) < n {
		p.tg = make([]bitset, n)
	}
	adj := p.tg[:n]
	for a := 0; a < n; a++ {
		adj[a] = bitset{}
		row := p.bw[a*n : (a+1)*n]
		for b, w := range row {
			if b != a && int64(w) >= t {
				adj[a].add(b)
			}
		}
	}
	p.bud.spend(1 + int64(n*n)/1024)
	return adj
}

// twoCore removes from set, repeatedly, the devices with fewer than two
// neighbours in it.
func twoCore(adj []bitset, set bitset) bitset {
	for changed := true; changed; {
		changed = false
		for _, v := range set.list() {
			nb := adj[v]
			nb.and(&set)
			if nb.count() < 2 {
				set.remove(v)
				changed = true
			}
		}
	}
	return set
}

// largestPart is the size of the largest connected part of set.
func largestPart(adj []bitset, set bitset) int {
	best := 0
	for set != (bitset{}) {
		part := reach(adj, set.lowest(), set)
		best = max(best, part.count())
		set.andNot(&part)
	}
	return best
}

// reach is the part of set connected to v (v in set).
func reach(adj []bitset, v int, set bitset) bitset {
	var seen bitset
	seen.add(v)
	frontier := seen
	for frontier != (bitset{}) {
		var next bitset
		for w := range frontier {
			for x := frontier[w]; x != 0; x &= x - 1 {
				next.or(&adj[w*64+bits.TrailingZeros64(x)])
			}
		}
		next.and(&set)
		next.andNot(&seen)
		seen.or(&next)
		frontier = next
	}
	return seen
}
