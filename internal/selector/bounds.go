package selector

import (
	"cmp"
	"math"
	"slices"
)

// upper bounds the key of every set in the subtree where classes < c are
// decided and r more devices come from classes c and later; levels[lvl]
// is the parent's bound of the first term, the returned index this
// subtree's. Each term is bounded over the sets that reach the bounds of
// the terms before it (TestUpperBoundsEverySubtreeSet).
func (b *classSearch) upper(c, r, lvl int) (key, int) {
	var u key
	b.joined = false // components are this node's from here on
	rule := b.p.policy.rules()
	if b.size >= 2 {
		u[kFirst], lvl = b.bottleneckUB(c, r, lvl)
		u[kFirst] = rule.first(b, c, r, u[kFirst])
	}
	b.markReach(c, r, u[kFirst])
	if b.size >= 2 {
		u[kTotal] = b.pairSumUB(&b.total, c, r)
		u[kCut] = rule.cut(b, c, r, u[kTotal])
		u[kLocality] = b.pairSumUB(&b.locality, c, r)
	}
	b.tieBounds(&u, c, r)
	return u, lvl
}

// numaLB is the fewest NUMA nodes a set of the subtree in markReach's
// parts can span.
func (b *classSearch) numaLB(c, r int) int {
	rest := r
	capBy := b.p.scr.a[:b.p.nNUMA]
	clear(capBy)
	for d := c; d < b.nc; d++ {
		if b.part[d] >= 0 {
			capBy[b.cls[d].numa] += len(b.cls[d].members)
		}
	}
	nn := b.numaNodes
	for id := 0; id < b.p.nNUMA; id++ {
		if b.numaCount[id] > 0 {
			rest -= capBy[id]
			capBy[id] = 0
		}
	}
	slices.Sort(capBy) // the fullest nodes first, from the end
	for i := len(capBy) - 1; i >= 0 && rest > 0 && capBy[i] > 0; i-- {
		rest -= capBy[i]
		nn++
	}
	return nn
}

// bottleneckUB is the largest class-level bandwidth t, among
// levels[:lvl+1], at which the decided classes and enough of the rest can
// still form one set connected over links >= t, and its index (0 and -1
// for none); exact at the root.
func (b *classSearch) bottleneckUB(c, r, lvl int) (int64, int) {
	// Deciding a class rarely lowers the bound: try the parent's first.
	if lvl >= 0 && b.connectable(c, r, b.levels[lvl]) {
		return b.levels[lvl], lvl
	}
	return largestFeasible(b.levels[:max(lvl, 0)], func(t int64) bool { return b.connectable(c, r, t) })
}

// components joins, over links >= t, the classes a set of the subtree
// can use (decided ones that give members, every class from c0 on),
// leaving each one's parent in scr.c and each root's members in scr.d,
// and returns them.
func (b *classSearch) components(c0 int, t int64) []int {
	parent, capc := b.p.scr.c, b.p.scr.d // set below for every active class
	active := b.active[:0]
	for c := 0; c < b.nc; c++ {
		if (c < c0 && b.take[c] > 0) || c >= c0 {
			active = append(active, c)
			parent[c] = c
			if c < c0 {
				capc[c] = b.take[c]
			} else {
				capc[c] = len(b.cls[c].members)
			}
		}
	}
	for i, c := range active {
		row := b.bw[c*b.nc : (c+1)*b.nc]
		for _, d := range active[i+1:] {
			if row[d] >= t {
				x, y := findRoot(parent, c), findRoot(parent, d)
				if x != y {
					parent[y] = x
					capc[x] += capc[y]
				}
			}
		}
	}
	return active
}

// findRoot is the root of x in the union-find forest parent.
func findRoot(parent []int, x int) int {
	for parent[x] != x {
		parent[x] = parent[parent[x]]
		x = parent[x]
	}
	return x
}

func (b *classSearch) connectable(c0, r int, t int64) bool {
	if !b.joinable(c0, t) {
		return false
	}
	b.keepJoin(t) // for markReach
	return true
}

// joinable is connectable before keeping what components joined.
func (b *classSearch) joinable(c0 int, t int64) bool {
	active := b.components(c0, t)
	parent, capc := b.p.scr.c, b.p.scr.d
	// a decided class of two or more needs a link >= t to join them
	root := -1
	for _, c := range active {
		if c >= c0 {
			break
		}
		if b.take[c] >= 2 && b.link(c, c) < t && !slices.ContainsFunc(active, func(d int) bool { return d != c && b.link(c, d) >= t }) {
			return false
		}
		if rc := findRoot(parent, c); root < 0 {
			root = rc
		} else if rc != root {
			return false
		}
	}
	if root >= 0 {
		return capc[root] >= b.size
	}
	// Nothing decided yet: some component must hold the whole set.
	for _, c := range active {
		rc := findRoot(parent, c)
		if rc != c || capc[rc] < b.size {
			continue
		}
		single := !slices.ContainsFunc(active, func(d int) bool { return d != c && findRoot(parent, d) == rc })
		if !single || b.link(c, c) >= t || b.size < 2 {
			return true
		}
	}
	return false
}

// keepJoin copies what components joined over links >= t.
func (b *classSearch) keepJoin(t int64) {
	copy(b.joinParent, b.p.scr.c[:b.nc])
	copy(b.joinCap, b.p.scr.d[:b.nc])
	b.joined, b.joinedAt = true, t
}

// markReach sets part[d], for each class d from c0 on, to the part (the
// component over links >= t, named by its lowest class from c0 on) a
// member of d can join in a set of the subtree whose first term is at
// least t, or -1 for none; partCap[l] is part l's undecided members.
// The later terms are bounded over these parts only (issue 25: on
// all-distinct devices they hold a few of the candidates).
func (b *classSearch) markReach(c0, r int, t int64) {
	if t <= 0 || (len(b.levels) > 0 && t <= b.levels[0]) {
		// every link is at least t: one part
		for d := c0; d < b.nc; d++ {
			b.part[d] = c0
		}
		if c0 < b.nc {
			b.partCap[c0] = b.capFrom[c0]
		}
		return
	}
	if !b.joined || b.joinedAt != t {
		b.components(c0, t)
		b.keepJoin(t)
	}
	parent, capc, lead := b.joinParent, b.joinCap, b.lead
	root := -1
	for c := 0; c < c0; c++ {
		if b.take[c] > 0 {
			root = findRoot(parent, c)
			break
		}
	}
	for d := c0; d < b.nc; d++ {
		b.part[d] = -1
		if rd := findRoot(parent, d); rd == root || (root < 0 && capc[rd] >= b.size) {
			b.part[d] = rd
			lead[rd] = -1
		}
	}
	decided := b.size - r // all in root's component
	if root < 0 {
		decided = 0
	}
	for d := c0; d < b.nc; d++ {
		if rd := b.part[d]; rd >= 0 {
			if lead[rd] < 0 {
				lead[rd] = d
				b.partCap[d] = capc[rd] - decided
			}
			b.part[d] = lead[rd]
		}
	}
}

// pairSumUB bounds a sum over pairs (total, locality) in the subtree's
// sets: the most partSumUB over markReach's parts.
func (b *classSearch) pairSumUB(s *pairSums, c, r int) int64 {
	best, found := s.sum, false
	for l := c; l < b.nc; l++ {
		if b.part[l] == l {
			if v, ok := b.partSumUB(s, c, l, r); ok && (!found || v > best) {
				best, found = v, true
			}
		}
	}
	return best
}

// partSumUB bounds the sum over pairs of the sets that add r devices of
// part l (classes from c on) to the decided members, q of the part left
// out: the smaller of what the r devices can bring in (each: its weight
// to the decided set and half its r-1 heaviest partners) and what the
// part loses when the q go (exact for q = 1), as docs/placement.md
// states. ok is false when the part is too small for the set.
func (b *classSearch) partSumUB(s *pairSums, c, l, r int) (ub int64, ok bool) {
	q := b.partCap[l] - r
	if q < 0 {
		return 0, false
	}
	// the second bound is the looser when more stay out than go in, and
	// needs every partner where the first needs the r-1 heaviest
	out := q <= r
	caps := b.p.scr.caps[:0]
	var all2 int64 // twice the sum over the pairs of U
	for d := l; d < b.nc; d++ {
		if b.part[d] != l {
			continue
		}
		needR, needQ := int64(r-1), int64(q-1)
		var in, topR, topQ int64
		for _, p := range s.partners[d] {
			if !out && needR <= 0 {
				break
			}
			if int(p.class) < c || b.part[p.class] != l {
				continue
			}
			cnt := int64(p.count)
			in += cnt * p.w
			if t := min(needR, cnt); t > 0 {
				topR += t * p.w
				needR -= t
			}
			if t := min(needQ, cnt); t > 0 {
				topQ += t * p.w
				needQ -= t
			}
		}
		k := len(b.cls[d].members)
		all2 += int64(k) * (2*s.toSet[d] + in)
		caps = append(caps, capped{v: 2*s.toSet[d] + topR, cap: k})
		// what a device left out takes away, kept for the second bound
		b.outW[d] = 2*(s.toSet[d]+in) - topQ
	}
	if q == 0 {
		// the whole part comes in: the sum over U is the set's
		return (2*s.sum + all2) / 2, true
	}
	byIn := 2*s.sum + takeBest(caps, r)
	if !out {
		return byIn / 2, true
	}
	caps = caps[:0]
	for d := l; d < b.nc; d++ {
		if b.part[d] == l {
			// negated: takeBest takes the q least
			caps = append(caps, capped{v: -b.outW[d], cap: len(b.cls[d].members)})
		}
	}
	byOut := 2*s.sum + all2 + takeBest(caps, q)
	return min(byIn, byOut) / 2, true
}

// capped is a value that up to cap devices can bring.
type capped struct {
	v   int64
	cap int
}

// takeBest is the most r devices can bring from list, each value taken
// by at most its cap (list is reordered).
func takeBest(list []capped, r int) int64 {
	slices.SortFunc(list, func(a, b capped) int { return cmp.Compare(b.v, a.v) })
	var sum int64
	for _, g := range list {
		if r == 0 {
			break
		}
		take := min(r, g.cap)
		sum += int64(take) * g.v
		r -= take
	}
	return sum
}

// degreeUB bounds the min cut by a decided device's best possible
// weighted degree, over the few decided classes of smallest degree so
// far (each gives a valid bound; all would cost a pass per class).
func (b *classSearch) degreeUB(c0, r int) int64 {
	const tried = 3
	var cand [tried]struct {
		c   int
		deg int64
	}
	n := 0
	for c := 0; c < c0; c++ {
		if b.take[c] == 0 {
			continue
		}
		deg := int64(b.take[c]-1) * b.link(c, c)
		for d := 0; d < c0; d++ {
			if d != c {
				deg += int64(b.take[d]) * b.link(c, d)
			}
		}
		// keep the smallest few, in insertion order
		i := n
		if n < tried {
			n++
		} else if deg >= cand[tried-1].deg {
			continue
		} else {
			i = tried - 1
		}
		for ; i > 0 && cand[i-1].deg > deg; i-- {
			cand[i] = cand[i-1]
		}
		cand[i].c, cand[i].deg = c, deg
	}
	ub := int64(math.MaxInt64)
	for _, cd := range cand[:n] {
		// plus the r best links to classes not yet decided
		list := b.p.scr.caps[:0]
		for d := c0; d < b.nc; d++ {
			list = append(list, capped{b.link(cd.c, d), len(b.cls[d].members)})
		}
		ub = min(ub, cd.deg+takeBest(list, r))
	}
	return ub
}
