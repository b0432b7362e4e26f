package selector

import (
	"math/bits"
	"slices"
	"time"
)

// classSearch is the branch-and-bound over how many members each class
// gives to the set: it decides the classes in order, the class at depth c
// taking from as many of its members as fit down to none, and cuts every
// subtree whose upper bound (bounds.go) cannot enter the list of the best
// sets found.
type classSearch struct {
	classGraph
	p        *problem
	levels   []int64 // distinct class-level bandwidths, ascending
	size     int     // devices per set
	top      *topK
	start    time.Time
	budget   time.Duration
	timedOut bool
	inexact  bool  // a ring could not be decided exactly
	openUB   int64 // highest first-term bound left unresolved
	nodes    int   // search nodes visited

	// What the classes from c on can still give, indexed by c (the first
	// undecided class); index nc is the empty rest.
	capFrom     []int     // members of classes c..
	idleFrom    []int     // members of non-busy classes c..
	lowLoadFrom [][]int64 // lowLoadFrom[c][r]: the r lowest loads of classes c.., summed
	poolFrom    []uint64  // members of classes c..
	// bestLinkFrom[c*nc+d]: class d's best link to another class >= c.
	bestLinkFrom []int64

	// The partial set: classes before the current depth are decided.
	take      []int   // take[c]: members class c gives
	linkToSet []int64 // linkToSet[d]: bandwidth from one member of class d to the decided members
	setMask   uint64  // the decided members
	setTotal  int64   // total pairwise bandwidth of the decided members
	numaMask  uint64  // NUMA nodes of the decided members
	busyCount int     // busy decided members
	loadSum   int64   // load of the decided members
	present   []int   // scratch: the classes a leaf takes from
	active    []int   // scratch for connectable
}

func (p *problem) branchAndBound(k int, budget time.Duration) result {
	b := p.newClassSearch(p.buildClasses(fullMask(p.n)), k, budget)
	b.dfs(0, p.size)
	res := result{top: b.top.e, exact: !b.timedOut && !b.inexact, considered: b.nodes}
	if !res.exact {
		best := res.top[0].key[0]
		if b.openUB > best && b.openUB > 0 {
			res.gap = float64(b.openUB-best) / float64(b.openUB)
		}
	}
	return res
}

func (p *problem) newClassSearch(cls []class, k int, budget time.Duration) *classSearch {
	g := newClassGraph(p, cls)
	nc := g.nc
	b := &classSearch{classGraph: g, p: p, size: p.size,
		top: &topK{k: k, e: make([]entry, 0, k)}, start: time.Now(), budget: budget,
		take: make([]int, nc), linkToSet: make([]int64, nc), openUB: -1}
	for c := range cls {
		for d := range cls {
			if c != d || len(cls[c].members) > 1 {
				b.levels = append(b.levels, b.link(c, d))
			}
		}
	}
	slices.Sort(b.levels)
	b.levels = slices.Compact(b.levels)
	b.capFrom = make([]int, nc+1)
	b.idleFrom = make([]int, nc+1)
	b.poolFrom = make([]uint64, nc+1)
	b.lowLoadFrom = make([][]int64, nc+1)
	b.bestLinkFrom = make([]int64, (nc+1)*nc)
	var loads []int64
	b.lowLoadFrom[nc] = []int64{0}
	for c := nc - 1; c >= 0; c-- {
		cl := &cls[c]
		b.capFrom[c] = b.capFrom[c+1] + len(cl.members)
		b.idleFrom[c] = b.idleFrom[c+1]
		if !cl.busy {
			b.idleFrom[c] += len(cl.members)
		}
		b.poolFrom[c] = b.poolFrom[c+1] | cl.firstMask[len(cl.members)]
		for _, v := range cl.members {
			loads = append(loads, p.load[v])
		}
		s := slices.Clone(loads)
		slices.Sort(s)
		pre := make([]int64, len(s)+1)
		for i, l := range s {
			pre[i+1] = pre[i] + l
		}
		b.lowLoadFrom[c] = pre
	}
	for c := 0; c < nc; c++ {
		for d := c; d < nc; d++ {
			var best int64
			for e := c; e < nc; e++ {
				if e != d && b.link(d, e) > best {
					best = b.link(d, e)
				}
			}
			b.bestLinkFrom[c*nc+d] = best
		}
	}
	b.present = make([]int, 0, nc)
	b.active = make([]int, 0, nc)
	return b
}

// dfs explores the sets that take r more devices from classes c and on.
func (b *classSearch) dfs(c, r int) {
	if b.timedOut {
		return
	}
	if r == 0 {
		b.nodes++
		b.leaf()
		return
	}
	if c == b.nc || b.capFrom[c] < r {
		return
	}
	b.nodes++
	if b.nodes&1023 == 0 && time.Since(b.start) > b.budget {
		b.timedOut = true
		if ub := b.upper(c, r); ub[0] > b.openUB {
			b.openUB = ub[0]
		}
		// The rest of the tree is unexplored: its bound is the root's.
		if ub := b.rootUB(); ub > b.openUB {
			b.openUB = ub
		}
		return
	}
	if b.top.full() {
		u := b.upper(c, r)
		w := b.top.worst()
		cmp := u.cmp(w.key)
		if cmp < 0 {
			return
		}
		if cmp == 0 && !better(entry{key: u, mask: b.lexMin(c, r)}, w) {
			return
		}
	}
	cl := &b.cls[c]
	hi := min(len(cl.members), r)
	lo := max(0, r-b.capFrom[c+1])
	for t := hi; t >= lo; t-- {
		b.decide(c, t, +1)
		b.dfs(c+1, r-t)
		b.decide(c, t, -1)
		if b.timedOut {
			return
		}
	}
}

// decide adds (sign +1) or removes (-1) the first t members of class c.
func (b *classSearch) decide(c, t, sign int) {
	if t == 0 {
		return
	}
	cl := &b.cls[c]
	s := int64(sign)
	t64 := int64(t)
	if sign > 0 {
		b.take[c] = t
		b.setMask |= cl.firstMask[t]
	} else {
		b.take[c] = 0
		b.setMask &^= cl.firstMask[t]
	}
	// pairs inside the class, and to the decided classes (linkToSet[c]
	// holds one member's links to them)
	b.setTotal += s * (t64*(t64-1)/2*cl.inner + t64*b.linkToSet[c])
	for d := c + 1; d < b.nc; d++ {
		b.linkToSet[d] += s * t64 * b.link(c, d)
	}
	b.busyCount += sign * boolInt(cl.busy) * t
	b.loadSum += s * cl.firstLoad[t]
	b.numaMask = b.numaOf(c + boolInt(sign > 0))
}

// numaOf is the set of NUMA nodes of the members taken from classes
// before upto.
func (b *classSearch) numaOf(upto int) uint64 {
	var nm uint64
	for c := 0; c < upto && c < b.nc; c++ {
		if b.take[c] > 0 {
			nm |= 1 << uint(b.cls[c].numa)
		}
	}
	return nm
}

func boolInt(x bool) int {
	if x {
		return 1
	}
	return 0
}

// lexMin is the lexicographically smallest set the subtree can reach: the
// decided members plus the r lowest-numbered members left.
func (b *classSearch) lexMin(c, r int) uint64 {
	mask := b.setMask
	pool := b.poolFrom[c]
	for ; r > 0 && pool != 0; r-- {
		low := pool & -pool
		mask |= low
		pool &^= low
	}
	return mask
}

// leaf scores the set b.take describes and offers it to the list.
func (b *classSearch) leaf() {
	p := b.p
	var k key
	present := b.present[:0]
	for c := 0; c < b.nc; c++ {
		if b.take[c] > 0 {
			present = append(present, c)
		}
	}
	k[2] = -int64(bits.OnesCount64(b.numaMask))
	k[3] = -int64(b.busyCount)
	k[4] = -b.loadSum
	if b.size >= 2 {
		if p.policy == Ring {
			ring, exact, ub := b.ringOf(present, b.take, b.size)
			if !exact {
				b.inexact = true
				if ub > b.openUB {
					b.openUB = ub
				}
			}
			if b.top.full() && ring < b.top.worst().key[0] {
				return
			}
			k[0] = ring
			// The smallest weighted degree bounds the min cut: skip
			// Stoer-Wagner when even that cannot enter the list.
			k[1] = b.minDegree(present, b.take)
			if b.top.full() && !better(entry{key: k, mask: b.setMask}, b.top.worst()) {
				return
			}
			k[1] = p.minCut(maskList(b.setMask))
		} else {
			k[0] = b.treeOf(present, b.take)
			k[1] = b.setTotal
		}
	}
	b.top.offer(entry{key: k, mask: b.setMask})
}
