package selector

import (
	"cmp"
	"math"
	"slices"
)

// upper bounds the key of every set in the subtree where classes < c are
// decided and r more devices come from classes c and later; levels[lvl]
// is a known bound of the first term (the parent's), and the returned
// index is this subtree's. Each term is bounded on its own, which bounds
// the key lexicographically.
func (b *classSearch) upper(c, r, lvl int) (key, int) {
	var u key
	if b.size >= 2 {
		u[kFirst], lvl = b.bottleneckUB(c, r, lvl)
		if b.p.policy == Ring && b.size >= 3 && b.p.top > 0 {
			u[kFirst] = min(u[kFirst], b.p.top)
		}
	}
	// every later term is bounded over the sets whose first term
	// reaches u's
	b.markReach(c, u[kFirst])
	if b.size >= 2 {
		u[kTotal] = b.pairSumUB(&b.total, c, r)
		if b.p.policy == Ring {
			// The min cut is at most the smallest degree, which is at
			// most the mean degree, 2 total / size.
			u[kCut] = min(b.degreeUB(c, r), 2*u[kTotal]/int64(b.size))
		}
		u[kLocality] = b.pairSumUB(&b.locality, c, r)
	}
	b.tieBounds(&u, c, r)
	return u, lvl
}

// numaLB is the fewest NUMA nodes a set of the subtree whose first term
// reaches the subtree's bound can span: those decided, plus as few more
// as can hold the rest of the classes it can use (markReach).
func (b *classSearch) numaLB(c, r int) int {
	rest := r
	capBy := b.p.scr.a[:b.p.nNUMA]
	clear(capBy)
	for d := c; d < b.nc; d++ {
		if b.reach[d] {
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
	if rest > 0 {
		cs := b.p.scr.b[:0]
		for _, k := range capBy {
			if k > 0 {
				cs = append(cs, k)
			}
		}
		slices.Sort(cs)
		for i := len(cs) - 1; i >= 0 && rest > 0; i-- {
			rest -= cs[i]
			nn++
		}
	}
	return nn
}

// bottleneckUB is the largest class-level bandwidth t, among levels[:lvl+1],
// at which the decided classes and enough of the rest can still form one
// set connected over links of at least t, and its index (-1 and 0 for
// none). Ring bottlenecks are bounded by it too. For the tree policy at
// the root it is exact: a connected component of at least size devices
// over links >= t holds a connected set of exactly size.
func (b *classSearch) bottleneckUB(c, r, lvl int) (int64, int) {
	// Deciding a class rarely lowers the bound: try the parent's first.
	if lvl >= 0 && b.connectable(c, r, b.levels[lvl]) {
		return b.levels[lvl], lvl
	}
	lo, hi := -1, lvl-1
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if b.connectable(c, r, b.levels[mid]) {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	if lo < 0 {
		return 0, -1
	}
	return b.levels[lo], lo
}

// components joins, over links of at least t, the classes a set of the
// subtree can use: the decided classes that give members (classes < c0)
// and every class from c0 on. It leaves each active class's parent in
// scr.c (find reads it) and each root's members in scr.d, and returns
// the active classes.
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
				x, y := b.find(c), b.find(d)
				if x != y {
					parent[y] = x
					capc[x] += capc[y]
				}
			}
		}
	}
	return active
}

// find is the root of class x in the components components left.
func (b *classSearch) find(x int) int {
	parent := b.p.scr.c
	for parent[x] != x {
		parent[x] = parent[parent[x]]
		x = parent[x]
	}
	return x
}

func (b *classSearch) connectable(c0, r int, t int64) bool {
	active := b.components(c0, t)
	capc := b.p.scr.d
	// Each decided class with two or more members needs a link >= t that
	// can join them.
	root := -1
	for _, c := range active {
		if c >= c0 {
			break
		}
		if b.take[c] >= 2 && b.link(c, c) < t {
			ok := false
			for _, d := range active {
				if d != c && b.link(c, d) >= t {
					ok = true
					break
				}
			}
			if !ok {
				return false
			}
		}
		if rc := b.find(c); root < 0 {
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
		rc := b.find(c)
		if rc != c || capc[rc] < b.size {
			continue
		}
		single := true
		for _, d := range active {
			if d != c && b.find(d) == rc {
				single = false
				break
			}
		}
		if !single || b.link(c, c) >= t || b.size < 2 {
			return true
		}
	}
	return false
}

// markReach sets reach[d], for each class d from c0 on, to whether a
// member of d can be in a set of the subtree whose first term is at
// least t. Such a set is connected over links >= t (a ring holds a
// spanning path, so for the ring policy too), so its devices lie in one
// component of the classes over those links: the decided classes' one,
// or, with nothing decided, one that holds size devices. The sets it
// leaves out rank below the subtree's bound on the first term, so the
// pair sums need not count them (issue 25: on all-distinct devices the
// component at the bottleneck is a small part of the candidates).
func (b *classSearch) markReach(c0 int, t int64) {
	if t <= 0 {
		// every link is at least 0: one component
		for d := c0; d < b.nc; d++ {
			b.reach[d] = true
		}
		return
	}
	active := b.components(c0, t)
	capc := b.p.scr.d
	root := -1
	for _, c := range active {
		if c >= c0 {
			break
		}
		root = b.find(c)
		break
	}
	for d := c0; d < b.nc; d++ {
		rd := b.find(d)
		b.reach[d] = rd == root || (root < 0 && capc[rd] >= b.size)
	}
}

// pairSumUB bounds a sum over pairs (total bandwidth, locality) in the
// sets of the subtree whose first term reaches the subtree's bound on it
// (the others rank below that bound whatever their sums): the decided
// pairs, plus for each device that can be added (markReach) its weight
// to the decided set and half of the heaviest r-1 partners it can find
// among the other classes not yet decided that can be added, the r
// devices taken greedily. Each pair of added devices counts half from
// either end, at most its weight from each, so the sum never falls
// below a set's.
func (b *classSearch) pairSumUB(s *pairSums, c, r int) int64 {
	gs := b.p.scr.caps
	n := 0
	for d := c; d < b.nc; d++ {
		if !b.reach[d] {
			continue
		}
		need := r - 1
		var best int64
		for _, p := range s.partners[d] {
			if need == 0 {
				break
			}
			if p.class < c || !b.reach[p.class] {
				continue
			}
			take := min(need, p.count)
			best += int64(take) * p.w
			need -= take
		}
		gs[n] = capped{v: 2*s.toSet[d] + best, cap: len(b.cls[d].members)}
		n++
	}
	return (2*s.sum + takeBest(gs[:n], r)) / 2
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

// degreeUB bounds the min cut: no cut is below a decided device's best
// possible weighted degree. It looks at the few decided classes with the
// smallest degree so far (each gives a valid bound; the min over all
// would cost a pass over every class pair per decided class).
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
