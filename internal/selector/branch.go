package selector

import (
	"slices"
)

// classSearch is the branch-and-bound over how many members each class
// gives to the set: class c at depth c, most members first, cutting every
// subtree whose upper bound (bounds.go) cannot enter the list. When the
// budget is spent it stops and keeps the bound of what is unexplored.
type classSearch struct {
	classGraph
	*classTables
	p       *problem
	size    int // devices per set
	top     *topK
	stopped bool  // the budget ran out
	open    key   // the highest bound of what is unexplored or unsettled
	hasOpen bool  // open holds a bound
	nodes   int   // search nodes visited
	ringHi  int64 // the leaf's ring bound when its rule left it unsettled, else 0 (entry.ringHi)

	// cutTables
	cut        []int64
	lowCutFrom [][]int64

	// The partial set: classes before the current depth are decided.
	take      []int    // take[c]: members class c gives
	total     pairSums // bandwidth of the decided pairs, and towards them
	locality  pairSums // locality of the decided pairs, and towards them
	setMask   bitset   // the decided members
	numaCount []int    // numaCount[id]: decided members on NUMA node id
	numaNodes int      // NUMA nodes with a decided member
	busyCount int      // busy decided members
	loadSum   int64    // load of the decided members
	degSum    int64    // deg (locality to every candidate) of the decided members
	cutSum    int64    // cut of the decided members
	present   []int    // scratch: the classes a leaf takes from
	active    []int    // scratch for connectable
	// markReach's parts and scratch (lead), partSumUB's scratch (outW)
	part, lead, partCap []int
	outW                []int64
	// joinParent and joinCap hold this node's components over links
	// >= joinedAt when joined (keepJoin)
	joined              bool
	joinedAt            int64
	joinParent, joinCap []int
}

// classTables are what a class search reads and never writes.
type classTables struct {
	graph    classGraph // the classes, without scratch
	levels   []int64    // distinct class-level bandwidths, ascending
	nodeCost int64      // work charged per node (search.go)

	// What classes c.. can still give; index nc is the empty rest.
	capFrom     []int     // members of classes c..
	idleFrom    []int     // members of non-busy classes c..
	lowLoadFrom [][]int64 // lowLoadFrom[c][r]: the r lowest loads of classes c.., summed
	lowDegFrom  [][]int64 // lowDegFrom[c][r]: the r lowest degrees (deg) of classes c.., summed
	poolFrom    []bitset  // members of classes c..

	twinBefore []int // twins

	// the partners lists of the total's and the locality's pairSums
	totalPartners, localityPartners [][]partner
}

// pairSums follows a sum of a class-level weight (bandwidth, locality)
// over pairs of decided devices, and each class's weight towards them.
type pairSums struct {
	w []int64 // nc*nc class-level weights, the diagonal inside a class
	// partners[d] lists, heaviest first, the classes a member of class d
	// can pair with and how many partners each offers.
	partners [][]partner
	toSet    []int64 // toSet[d]: from one member of class d to the decided members
	sum      int64   // over the pairs of decided members
}

// partner is a class and how many of its members a device can pair with.
type partner struct {
	class, count int32
	w            int64
}

// partnersOf is pairSums.partners of each class, for the bandwidth and
// the locality of g.
func partnersOf(g *classGraph) (total, locality [][]partner) {
	nc := g.nc
	out := make([][]partner, 2*nc)
	all := make([]partner, 2*nc*nc) // every class's list, one after another
	for i, w := range [2][]int64{g.bw, g.loc} {
		for d := range nc {
			at := (i*nc + d) * nc
			row := all[at : at : at+nc]
			for e := range nc {
				count := len(g.cls[e].members)
				if e == d {
					count--
				}
				if count <= 0 {
					continue
				}
				// insertion after every heavier or as heavy (lower) class
				wt := w[d*nc+e]
				row = append(row, partner{})
				j := len(row) - 1
				for ; j > 0 && row[j-1].w < wt; j-- {
					row[j] = row[j-1]
				}
				row[j] = partner{int32(e), int32(count), wt}
			}
			out[i*nc+d] = row
		}
	}
	return out[:nc:nc], out[nc:]
}

// decide adds (sign +1) or removes (-1) t members of class c.
func (s *pairSums) decide(c, t, sign, nc int) {
	t64, s64 := int64(t), int64(sign)
	s.sum += s64 * (t64*(t64-1)/2*s.w[c*nc+c] + t64*s.toSet[c])
	for d := c + 1; d < nc; d++ {
		s.toSet[d] += s64 * t64 * s.w[c*nc+d]
	}
}

func (p *problem) branchAndBound(k int) result {
	p.policy.rules().prepare(p)
	b := p.newClassSearch(p.buildClasses(firstN(p.n)), k)
	b.offer(firstN(p.size).list()) // the naive set: the search has an answer
	if k == 1 && b.rootSettled() {
		return b.result()
	}
	for _, s := range p.seeds(b) {
		if p.bud.spent() {
			break
		}
		b.offer(s)
	}
	// a spent budget stops it at the root, which keeps the root's bound
	b.dfs(0, p.size, len(b.levels)-1)
	return b.result()
}

// rootSettled is the search's first node when one set is wanted and the
// naive set is listed: when the root's bound ranks no set above it, the
// search is over without seeds (the plugin's test sizes: 4 of 32 MI308
// partitions, 8 of 63 CPX). It charges the node as dfs does.
func (b *classSearch) rootSettled() bool {
	b.nodes++
	b.p.bud.spend(b.nodeCost)
	u, _ := b.upper(0, b.size, len(b.levels)-1)
	if b.p.bud.spent() {
		b.nodes-- // dfs visits the root again
		return false
	}
	return b.beaten(u, 0, b.size)
}

// beaten says the full list takes no set of the subtree (c, r) bounded
// by u: no higher key, and no lexicographically smaller set as good.
func (b *classSearch) beaten(u key, c, r int) bool {
	w := b.top.worst()
	cmp := u.cmp(w.key)
	return cmp < 0 || (cmp == 0 && !better(entry{key: u, mask: b.lexMin(c, r)}, w))
}

func (b *classSearch) result() result {
	res := result{top: b.top.e, considered: b.nodes, exact: true}
	if b.hasOpen && len(res.top) > 0 && b.open.cmp(res.top[0].key) > 0 {
		res.exact, res.bound = false, b.open
	}
	return res
}

// newClassSearch starts a search over the classes cls.
func (p *problem) newClassSearch(cls []class, k int) *classSearch {
	t := p.newClassTables(cls)
	g := t.graph
	g.scr = p.scr
	nc := g.nc
	ints, sets := make([]int, 8*nc+p.nNUMA), make([]int64, 3*nc)
	slab := func(i int) []int { return ints[i*nc : (i+1)*nc : (i+1)*nc] } // the i-th nc ints
	b := &classSearch{classGraph: g, classTables: t, p: p, size: p.size,
		top:  &topK{k: k, e: make([]entry, 0, k)},
		take: slab(0), present: slab(1)[:0], active: slab(2)[:0],
		part: slab(3), lead: slab(4), joinParent: slab(5), joinCap: slab(6), partCap: slab(7),
		numaCount: ints[8*nc:],
		total:     pairSums{w: g.bw, partners: t.totalPartners, toSet: sets[:nc:nc]},
		locality:  pairSums{w: g.loc, partners: t.localityPartners, toSet: sets[nc : 2*nc : 2*nc]},
		outW:      sets[2*nc:]}
	b.cutTables()
	return b
}

// cutTables fill cut and lowCutFrom for sets of b.size devices: a member
// of class c keeps at least cut[c] of its locality outside the set (its
// degree less its size-1 highest locality links), lowCutFrom[c][r] is
// the r lowest cuts of classes c.., summed.
func (b *classSearch) cutTables() {
	nc := b.nc
	all := make([]int64, nc, nc+(nc+1)*(b.size+1))
	b.cut = all[:nc:nc]
	for c := range b.cls {
		need, top := int64(b.size-1), int64(0)
		for _, pt := range b.locality.partners[c] {
			if need <= 0 {
				break
			}
			take := min(need, int64(pt.count))
			top += take * pt.w
			need -= take
		}
		b.cut[c] = b.cls[c].deg - top
	}
	sums := all[nc:]
	cuts := b.p.scr.x[:0] // the size lowest cuts of classes c.., ascending
	b.lowCutFrom = make([][]int64, nc+1)
	b.lowCutFrom[nc], sums = lowestSums(sums, cuts)
	for c := nc - 1; c >= 0; c-- {
		cuts = insertCopies(cuts, b.cut[c], len(b.cls[c].members), b.size)
		b.lowCutFrom[c], sums = lowestSums(sums, cuts)
	}
}

// newClassTables are the tables of a search over cls for sets of p.size
// devices.
func (p *problem) newClassTables(cls []class) *classTables {
	g := newClassGraph(p, cls)
	g.scr = nil
	nc, size := g.nc, p.size
	t := &classTables{graph: g}
	t.totalPartners, t.localityPartners = partnersOf(&g)
	ints := make([]int, 3*nc+2)
	t.capFrom, t.idleFrom, t.twinBefore = ints[:nc+1:nc+1], ints[nc+1:2*nc+2:2*nc+2], ints[2*nc+2:]
	i64s := make([]int64, nc*nc+2*size+2*(nc+1)*(size+1))
	t.levels = i64s[: 0 : nc*nc]
	for c := range cls {
		for d := range cls {
			if c != d || len(cls[c].members) > 1 {
				t.levels = append(t.levels, g.link(c, d))
			}
		}
	}
	slices.Sort(t.levels)
	t.levels = slices.Compact(t.levels)
	rest := i64s[nc*nc:]
	loads, degs, sums := rest[:0:size], rest[size:size:2*size], rest[2*size:2*size]
	t.poolFrom = make([]bitset, nc+1)
	low := make([][]int64, 2*(nc+1))
	t.lowLoadFrom, t.lowDegFrom = low[:nc+1:nc+1], low[nc+1:]
	t.lowLoadFrom[nc], sums = lowestSums(sums, loads)
	t.lowDegFrom[nc], sums = lowestSums(sums, degs)
	for c := nc - 1; c >= 0; c-- {
		cl := &cls[c]
		t.capFrom[c] = t.capFrom[c+1] + len(cl.members)
		t.idleFrom[c] = t.idleFrom[c+1] + boolInt(!cl.busy)*len(cl.members)
		t.poolFrom[c] = t.poolFrom[c+1]
		t.poolFrom[c].or(&cl.firstMask[len(cl.members)])
		for _, v := range cl.members {
			loads = insertCopies(loads, p.load[v], 1, size)
		}
		degs = insertCopies(degs, cl.deg, len(cl.members), size)
		t.lowLoadFrom[c], sums = lowestSums(sums, loads)
		t.lowDegFrom[c], sums = lowestSums(sums, degs)
	}
	t.nodeCost = 1 + int64(nc*nc)/256
	twins(&g, t.twinBefore)
	return t
}

// twins finds, for each class, the nearest lower class it could swap
// with as a whole without changing any set's score (the partitioned GPUs
// of one NUMA node), or -1.
func twins(b *classGraph, out []int) {
	for c := range out {
		out[c] = -1
		for e := c - 1; e >= 0 && out[c] < 0; e-- {
			ce, cc := &b.cls[e], &b.cls[c]
			if len(ce.members) != len(cc.members) || ce.numa != cc.numa || ce.busy != cc.busy || ce.deg != cc.deg ||
				b.link(e, e) != b.link(c, c) || b.loc[e*b.nc+e] != b.loc[c*b.nc+c] || !slices.Equal(ce.firstLoad, cc.firstLoad) {
				continue
			}
			same := true // the same link and locality to every third class
			for d := 0; d < b.nc && same; d++ {
				same = d == e || d == c || (b.link(e, d) == b.link(c, d) && b.loc[e*b.nc+d] == b.loc[c*b.nc+d])
			}
			if same {
				out[c] = e
			}
		}
	}
}

// lowestSums appends to buf s with s[r] the sum of the r lowest of the
// ascending vals, and returns s and buf.
func lowestSums(buf, sorted []int64) (s, rest []int64) {
	start := len(buf)
	buf = append(buf, 0)
	for i, x := range sorted {
		buf = append(buf, buf[start+i]+x)
	}
	return buf[start:len(buf):len(buf)], buf
}

// insertCopies inserts k copies of x into the ascending vals and keeps
// the lowest limit of them; vals has room for limit.
func insertCopies(vals []int64, x int64, k, limit int) []int64 {
	i, _ := slices.BinarySearch(vals, x)
	if i >= limit {
		return vals
	}
	n := len(vals)
	vals = vals[:min(n+k, limit)]
	copy(vals[min(i+k, len(vals)):], vals[i:n])
	for j := i; j < min(i+k, len(vals)); j++ {
		vals[j] = x
	}
	return vals
}

// dfs explores the sets that take r more devices from classes c and on;
// levels[lvl] bounds their first term (the parent's bound).
func (b *classSearch) dfs(c, r, lvl int) {
	if r == 0 {
		b.nodes++
		b.p.bud.spend(1)
		b.leaf()
		return
	}
	if c == b.nc || b.capFrom[c] < r {
		return
	}
	b.nodes++
	b.p.bud.spend(b.nodeCost)
	u, lvl := b.upper(c, r, lvl)
	if b.p.bud.spent() {
		b.stopped = true
		b.keepOpen(u)
		return
	}
	if b.top.full() && b.beaten(u, c, r) {
		return
	}
	cl := &b.cls[c]
	hi := min(len(cl.members), r)
	if e := b.twinBefore[c]; e >= 0 {
		// of sets that only swap twin classes, only the lexicographically
		// smaller (more from the lower class) is searched
		hi = min(hi, b.take[e])
	}
	lo := max(0, r-b.capFrom[c+1])
	for t := hi; t >= lo; t-- {
		b.decide(c, t, +1)
		b.dfs(c+1, r-t, lvl)
		b.decide(c, t, -1)
		if b.stopped {
			if t > lo {
				b.keepOpen(u) // the branches not tried
			}
			return
		}
	}
}

// keepOpen records u as the bound of a region left unsettled.
func (b *classSearch) keepOpen(u key) {
	if !b.hasOpen || u.cmp(b.open) > 0 {
		b.open, b.hasOpen = u, true
	}
}

// decide adds (sign +1) or removes (-1) the first t members of class c.
func (b *classSearch) decide(c, t, sign int) {
	if t == 0 {
		return
	}
	cl := &b.cls[c]
	if sign > 0 {
		b.take[c] = t
		b.setMask.or(&cl.firstMask[t])
	} else {
		b.take[c] = 0
		b.setMask.andNot(&cl.firstMask[t])
	}
	b.total.decide(c, t, sign, b.nc)
	b.locality.decide(c, t, sign, b.nc)
	before := b.numaCount[cl.numa]
	b.numaCount[cl.numa] += sign * t
	b.numaNodes += boolInt(b.numaCount[cl.numa] > 0) - boolInt(before > 0)
	b.busyCount += sign * boolInt(cl.busy) * t
	b.loadSum += int64(sign) * cl.firstLoad[t]
	b.degSum += int64(sign*t) * cl.deg
	b.cutSum += int64(sign*t) * b.cut[c]
}

func boolInt(x bool) int {
	if x {
		return 1
	}
	return 0
}

// lexMin is the lexicographically smallest set the subtree can reach: the
// decided members plus the r lowest-numbered members left.
func (b *classSearch) lexMin(c, r int) bitset {
	mask := b.setMask
	pool := b.poolFrom[c]
	for ; r > 0; r-- {
		low := pool.lowest()
		if low < 0 {
			break
		}
		mask.add(low)
		pool.remove(low)
	}
	return mask
}

// leaf scores the set b.take describes and offers it to the list.
func (b *classSearch) leaf() {
	p := b.p
	var k key
	b.tieKey(&k)
	present := b.present[:0]
	for c := 0; c < b.nc; c++ {
		if b.take[c] > 0 {
			present = append(present, c)
		}
	}
	b.present = present
	b.ringHi = 0
	if b.size >= 2 {
		var ok bool
		if k[kFirst], k[kCut], ok = p.policy.rules().leaf(b, present, k); !ok {
			return
		}
	}
	b.top.offer(entry{key: k, mask: b.setMask, ringHi: b.ringHi})
}

// ringLeaf is the ring policy's leaf: the ring and the min cut of the
// set, unless their bounds (degree bound, smallest degree) show it cannot
// enter the list.
func (b *classSearch) ringLeaf(present []int, k key) (first, cut int64, ok bool) {
	p := b.p
	k[kCut] = b.minDegree(present, b.take)
	if b.size >= 3 {
		k[kFirst] = b.ringUpper(present, b.take)
		if b.top.full() && !better(entry{key: k, mask: b.setMask}, b.top.worst()) {
			return 0, 0, false
		}
	}
	vs := b.setMask.list()
	var rr ringRange
	if len(vs) <= enumLimit {
		rr = p.ringOf(vs)
	} else {
		rr = p.ringSearch(&b.classGraph, present, b.take, vs)
	}
	k[kFirst] = rr.lo
	if !rr.exact() {
		open := k
		open[kFirst] = rr.hi
		b.keepOpen(open)
		b.ringHi = rr.hi // for the entry (reportRing settles it if chosen)
	}
	if b.top.full() && !better(entry{key: k, mask: b.setMask}, b.top.worst()) {
		return 0, 0, false
	}
	return rr.lo, p.minCut(vs), true
}

// offer scores a seed in its canonical form (each class giving its first
// members) and offers it.
func (b *classSearch) offer(vs []int) {
	set := setOf(vs)
	var mask bitset
	for c := range b.cls {
		t := 0
		for _, v := range b.cls[c].members {
			t += boolInt(set.has(v))
		}
		mask.or(&b.cls[c].firstMask[t])
	}
	e := b.p.evalSet(mask.list())
	if e.ringHi != 0 {
		open := e.key
		open[kFirst] = e.ringHi
		b.keepOpen(open)
	}
	b.top.offer(e)
}
