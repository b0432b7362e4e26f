package selector

import (
	"math"
	"math/bits"
	"slices"
)

// upper bounds the key of every set in the subtree where classes < c are
// decided and r more devices come from classes c and later. Each term is
// bounded on its own, which bounds the key lexicographically.
func (b *classSearch) upper(c, r int) key {
	var u key
	if b.size >= 2 {
		u[0] = b.bottleneckUB(c, r)
		if b.p.policy == Ring {
			u[1] = b.degreeUB(c, r)
		} else {
			u[1] = b.totalUB(c, r)
		}
	}
	u[2] = -int64(b.numaLB(c, r))
	u[3] = -int64(b.busyCount + max(0, r-b.idleFrom[c]))
	u[4] = -(b.loadSum + b.lowLoadFrom[c][r])
	return u
}

// numaLB is the fewest NUMA nodes a set of the subtree can span: those
// decided, plus as few more as can hold the rest.
func (b *classSearch) numaLB(c, r int) int {
	rest := r
	var capBy [MaxCandidates]int
	for d := c; d < b.nc; d++ {
		capBy[b.cls[d].numa] += len(b.cls[d].members)
	}
	nn := bits.OnesCount64(b.numaMask)
	for id := 0; id < b.p.nNUMA; id++ {
		if b.numaMask>>uint(id)&1 == 1 {
			rest -= capBy[id]
			capBy[id] = 0
		}
	}
	if rest > 0 {
		var csArr [MaxCandidates]int
		cs := csArr[:0]
		for _, k := range capBy[:b.p.nNUMA] {
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

// bottleneckUB is the largest class-level bandwidth t at which the
// decided classes and enough of the rest can still form one set connected
// over links of at least t. Ring bottlenecks are bounded by it too.
func (b *classSearch) bottleneckUB(c, r int) int64 {
	t, _ := largestFeasible(b.levels, func(t int64) bool { return b.connectable(c, r, t) })
	return t
}

func (b *classSearch) connectable(c0, r int, t int64) bool {
	var parent [MaxCandidates]int
	var capc [MaxCandidates]int
	find := func(x int) int {
		for parent[x] != x {
			parent[x] = parent[parent[x]]
			x = parent[x]
		}
		return x
	}
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
		for _, d := range active[i+1:] {
			if b.link(c, d) >= t {
				x, y := find(c), find(d)
				if x != y {
					parent[y] = x
					capc[x] += capc[y]
				}
			}
		}
	}
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
		if rc := find(c); root < 0 {
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
		rc := find(c)
		if rc != c || capc[rc] < b.size {
			continue
		}
		single := true
		for _, d := range active {
			if d != c && find(d) == rc {
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

// rootUB is the first-term bound of the whole search.
func (b *classSearch) rootUB() int64 {
	saved := b.take
	b.take = make([]int, b.nc)
	ub := int64(0)
	if b.size >= 2 {
		ub = b.bottleneckUB(0, b.size)
	}
	b.take = saved
	return ub
}

// totalUB bounds the total pairwise bandwidth: the decided pairs, plus
// for each added device its links to the decided set and half of the best
// it can have to the other added ones, taken greedily.
func (b *classSearch) totalUB(c, r int) int64 {
	nc := b.nc
	type gain struct {
		v   int64
		cap int
	}
	var gs [MaxCandidates]gain
	n := 0
	for d := c; d < nc; d++ {
		// an added device's r-1 partners: up to size-1 of its own class
		// at the class's link, the rest at its best link to another class
		own, other := b.link(d, d), b.bestLinkFrom[c*nc+d]
		k := 0
		if own > other {
			k = min(len(b.cls[d].members)-1, r-1)
		}
		bd := int64(k)*own + int64(r-1-k)*other
		gs[n] = gain{v: 2*b.linkToSet[d] + bd, cap: len(b.cls[d].members)}
		n++
	}
	list := gs[:n]
	slices.SortFunc(list, func(a, c gain) int {
		switch {
		case a.v > c.v:
			return -1
		case a.v < c.v:
			return 1
		}
		return 0
	})
	sum := 2 * b.setTotal
	rest := r
	for _, g := range list {
		if rest == 0 {
			break
		}
		take := min(rest, g.cap)
		sum += int64(take) * g.v
		rest -= take
	}
	return sum / 2
}

// degreeUB bounds the min cut: no cut is below a decided device's best
// possible weighted degree.
func (b *classSearch) degreeUB(c0, r int) int64 {
	nc := b.nc
	ub := int64(math.MaxInt64)
	var ws [MaxCandidates]int64
	var caps [MaxCandidates]int
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
		// the r best links to classes not yet decided
		n := 0
		for d := c0; d < nc; d++ {
			ws[n], caps[n] = b.link(c, d), len(b.cls[d].members)
			n++
		}
		rest := r
		for rest > 0 {
			bi := -1
			for i := 0; i < n; i++ {
				if caps[i] > 0 && (bi < 0 || ws[i] > ws[bi]) {
					bi = i
				}
			}
			if bi < 0 {
				break
			}
			take := min(rest, caps[bi])
			deg += int64(take) * ws[bi]
			rest -= take
			caps[bi] = 0
		}
		ub = min(ub, deg)
	}
	return ub
}
