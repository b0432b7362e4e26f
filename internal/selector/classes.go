package selector

import (
	"math"
	"math/bits"
	"slices"
	"sort"
	"time"
)

// class is a group of interchangeable candidates: the same link to every
// other candidate, the same NUMA node and busy state. Members of a class
// of three or more share one internal bandwidth (the relation is
// transitive, so all their mutual links are equal).
type class struct {
	members  []int // local indices sorted by (load, index)
	w        int64 // bandwidth between two members (0 for a single one)
	numa     int
	busy     bool
	prefMask []uint64 // prefMask[m]: the m members a set takes
	prefLoad []int64
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
			cl.w = p.bw[cl.members[0]*n+cl.members[1]]
		}
		sort.SliceStable(cl.members, func(i, j int) bool {
			a, b := cl.members[i], cl.members[j]
			if p.load[a] != p.load[b] {
				return p.load[a] < p.load[b]
			}
			return a < b
		})
		cl.prefMask = make([]uint64, len(cl.members)+1)
		cl.prefLoad = make([]int64, len(cl.members)+1)
		for i, v := range cl.members {
			cl.prefMask[i+1] = cl.prefMask[i] | 1<<uint(v)
			cl.prefLoad[i+1] = cl.prefLoad[i] + p.load[v]
		}
	}
	return cls
}

// bb is the branch-and-bound over class multiplicities.
type bb struct {
	p     *problem
	cls   []class
	nc    int
	wc    []int64 // nc*nc; wc[c*nc+c] is the class's internal bandwidth
	vals  []int64 // distinct class-level bandwidths, ascending
	size  int
	top   *topK
	start time.Time
	limit time.Duration

	// suffix data, indexed by the first unfixed class
	sufCap     []int
	sufNonBusy []int
	sufLoad    [][]int64 // sufLoad[ci][r]: the r lowest loads of classes ci..
	sufPool    []uint64
	sufInter   []int64 // sufInter[ci*nc+d]: best link of d to another class >= ci

	// state
	m         []int
	eP        []int64 // eP[d]: bandwidth from class d's member to the fixed set
	fixedMask uint64
	numaMask  uint64
	busyCnt   int
	loadSum   int64
	pTotal    int64

	nodes    int
	timedOut bool
	inexact  bool
	openUB   int64 // highest first-term bound left unresolved
	scratch  []int
	order    []int
}

func (p *problem) branchAndBound(k int, budget time.Duration) result {
	all := uint64(1)<<uint(p.n) - 1
	if p.n == 64 {
		all = ^uint64(0)
	}
	b := p.newBB(p.buildClasses(all), k, budget)
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

func (p *problem) newBB(cls []class, k int, budget time.Duration) *bb {
	nc := len(cls)
	b := &bb{p: p, cls: cls, nc: nc, wc: make([]int64, nc*nc), size: p.size,
		top: &topK{k: k, e: make([]entry, 0, k)}, start: time.Now(), limit: budget,
		m: make([]int, nc), eP: make([]int64, nc), openUB: -1}
	for c := range cls {
		for d := range cls {
			if c == d {
				b.wc[c*nc+d] = cls[c].w
			} else {
				b.wc[c*nc+d] = p.bw[cls[c].members[0]*p.n+cls[d].members[0]]
			}
			if c != d || len(cls[c].members) > 1 {
				b.vals = append(b.vals, b.wc[c*nc+d])
			}
		}
	}
	slices.Sort(b.vals)
	b.vals = slices.Compact(b.vals)
	b.sufCap = make([]int, nc+1)
	b.sufNonBusy = make([]int, nc+1)
	b.sufPool = make([]uint64, nc+1)
	b.sufLoad = make([][]int64, nc+1)
	b.sufInter = make([]int64, (nc+1)*nc)
	var loads []int64
	b.sufLoad[nc] = []int64{0}
	for c := nc - 1; c >= 0; c-- {
		cl := &cls[c]
		b.sufCap[c] = b.sufCap[c+1] + len(cl.members)
		b.sufNonBusy[c] = b.sufNonBusy[c+1]
		if !cl.busy {
			b.sufNonBusy[c] += len(cl.members)
		}
		b.sufPool[c] = b.sufPool[c+1] | cl.prefMask[len(cl.members)]
		for _, v := range cl.members {
			loads = append(loads, p.load[v])
		}
		s := slices.Clone(loads)
		slices.Sort(s)
		pre := make([]int64, len(s)+1)
		for i, l := range s {
			pre[i+1] = pre[i] + l
		}
		b.sufLoad[c] = pre
	}
	for ci := 0; ci < nc; ci++ {
		for d := ci; d < nc; d++ {
			var best int64
			for e := ci; e < nc; e++ {
				if e != d && b.wc[d*nc+e] > best {
					best = b.wc[d*nc+e]
				}
			}
			b.sufInter[ci*nc+d] = best
		}
	}
	b.scratch = make([]int, 0, nc)
	b.order = make([]int, 0, nc)
	return b
}

func (b *bb) dfs(ci, r int) {
	if b.timedOut {
		return
	}
	if r == 0 {
		b.nodes++
		b.leaf()
		return
	}
	if ci == b.nc || b.sufCap[ci] < r {
		return
	}
	b.nodes++
	if b.nodes&1023 == 0 && time.Since(b.start) > b.limit {
		b.timedOut = true
		if ub := b.upper(ci, r); ub[0] > b.openUB {
			b.openUB = ub[0]
		}
		// The rest of the tree is unexplored: its bound is the root's.
		if ub := b.rootUB(); ub > b.openUB {
			b.openUB = ub
		}
		return
	}
	if b.top.full() {
		u := b.upper(ci, r)
		w := b.top.worst()
		c := u.cmp(w.key)
		if c < 0 {
			return
		}
		if c == 0 && !better(entry{key: u, mask: b.lexMin(ci, r)}, w) {
			return
		}
	}
	cl := &b.cls[ci]
	hi := min(len(cl.members), r)
	lo := max(0, r-b.sufCap[ci+1])
	for mc := hi; mc >= lo; mc-- {
		b.fix(ci, mc, +1)
		b.dfs(ci+1, r-mc)
		b.fix(ci, mc, -1)
		if b.timedOut {
			return
		}
	}
}

// fix adds (sign +1) or removes (-1) mc members of class ci to the set.
func (b *bb) fix(ci, mc, sign int) {
	if mc == 0 {
		return
	}
	cl := &b.cls[ci]
	nc := b.nc
	s := int64(sign)
	m64 := int64(mc)
	if sign > 0 {
		b.m[ci] = mc
		b.fixedMask |= cl.prefMask[mc]
	} else {
		b.m[ci] = 0
		b.fixedMask &^= cl.prefMask[mc]
	}
	// pairs inside the class, and to the fixed classes (eP[ci] holds them)
	b.pTotal += s * (m64*(m64-1)/2*cl.w + m64*b.eP[ci])
	for d := ci + 1; d < nc; d++ {
		b.eP[d] += s * m64 * b.wc[ci*nc+d]
	}
	b.busyCnt += sign * boolInt(cl.busy) * mc
	b.loadSum += s * cl.prefLoad[mc]
	b.recomputeNUMA(ci + boolInt(sign > 0))
}

func (b *bb) recomputeNUMA(upto int) {
	var nm uint64
	for c := 0; c < upto && c < b.nc; c++ {
		if b.m[c] > 0 {
			nm |= 1 << uint(b.cls[c].numa)
		}
	}
	b.numaMask = nm
}

func boolInt(x bool) int {
	if x {
		return 1
	}
	return 0
}

// lexMin is the lexicographically smallest set the subtree can reach: the
// fixed members plus the r lowest-numbered members left.
func (b *bb) lexMin(ci, r int) uint64 {
	mask := b.fixedMask
	pool := b.sufPool[ci]
	for ; r > 0 && pool != 0; r-- {
		low := pool & -pool
		mask |= low
		pool &^= low
	}
	return mask
}

// leaf scores the set the multiplicities b.m describe.
func (b *bb) leaf() {
	p, nc := b.p, b.nc
	var k key
	present := b.scratch[:0]
	for c := 0; c < nc; c++ {
		if b.m[c] > 0 {
			present = append(present, c)
		}
	}
	if b.size >= 2 {
		if p.kind == kindRing {
			ring, exact, ub := b.ringOf(present)
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
			k[1] = b.minDegree(present) // bounds the min cut
			k[2], k[3], k[4] = -int64(bits.OnesCount64(b.numaMask)), -int64(b.busyCnt), -b.loadSum
			if b.top.full() && !better(entry{key: k, mask: b.fixedMask}, b.top.worst()) {
				return
			}
			k[1] = p.minCut(maskList(b.fixedMask))
		} else {
			k[0] = b.treeOf(present)
			k[1] = b.pTotal
		}
	}
	k[2] = -int64(bits.OnesCount64(b.numaMask))
	k[3] = -int64(b.busyCnt)
	k[4] = -b.loadSum
	b.top.offer(entry{key: k, mask: b.fixedMask})
}

// treeOf is the widest-spanning-tree bottleneck of the set: the class
// graph's own bottleneck, and for each class with two or more members the
// best link that can join them (their own, or through another class).
func (b *bb) treeOf(present []int) int64 {
	nc := b.nc
	bn := int64(math.MaxInt64)
	// Prim over present classes.
	if len(present) > 1 {
		var best [MaxCandidates]int64
		var in [MaxCandidates]bool
		for i := 1; i < len(present); i++ {
			best[i] = b.wc[present[0]*nc+present[i]]
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
				if w := b.wc[present[sel]*nc+present[i]]; !in[i] && w > best[i] {
					best[i] = w
				}
			}
		}
	}
	for _, c := range present {
		if b.m[c] < 2 {
			continue
		}
		j := b.wc[c*nc+c]
		for _, d := range present {
			if d != c {
				j = max(j, b.wc[c*nc+d])
			}
		}
		bn = min(bn, j)
	}
	return bn
}

// minDegree is the smallest weighted degree of a device of the set.
func (b *bb) minDegree(present []int) int64 {
	nc := b.nc
	best := int64(math.MaxInt64)
	for _, c := range present {
		deg := int64(b.m[c]-1) * b.wc[c*nc+c]
		for _, d := range present {
			if d != c {
				deg += int64(b.m[d]) * b.wc[c*nc+d]
			}
		}
		best = min(best, deg)
	}
	return best
}

// upper bounds the key of every set in the subtree where classes < ci are
// fixed and r more devices come from classes ci and later.
func (b *bb) upper(ci, r int) key {
	var u key
	nc := b.nc
	if b.size >= 2 {
		u[0] = b.bottleneckUB(ci, r)
		if b.p.kind == kindRing {
			u[1] = b.degreeUB(ci, r)
		} else {
			u[1] = b.totalUB(ci, r)
		}
	}
	// NUMA nodes: those fixed, plus as few more as can hold the rest.
	rest := r
	var capBy [MaxCandidates]int
	for d := ci; d < nc; d++ {
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
		for _, c := range capBy[:b.p.nNUMA] {
			if c > 0 {
				cs = append(cs, c)
			}
		}
		slices.Sort(cs)
		for i := len(cs) - 1; i >= 0 && rest > 0; i-- {
			rest -= cs[i]
			nn++
		}
	}
	u[2] = -int64(nn)
	u[3] = -int64(b.busyCnt + max(0, r-b.sufNonBusy[ci]))
	u[4] = -(b.loadSum + b.sufLoad[ci][r])
	return u
}

// bottleneckUB is the largest class-level bandwidth t at which the fixed
// classes and enough of the rest can still form one set connected over
// links of at least t. Ring bottlenecks are bounded by it too.
func (b *bb) bottleneckUB(ci, r int) int64 {
	lo, hi := -1, len(b.vals)-1 // vals[lo] feasible (lo=-1: none)
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if b.connectable(ci, r, b.vals[mid]) {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	if lo < 0 {
		return 0
	}
	return b.vals[lo]
}

func (b *bb) connectable(ci, r int, t int64) bool {
	nc := b.nc
	var parent [MaxCandidates]int
	var capc [MaxCandidates]int
	find := func(x int) int {
		for parent[x] != x {
			parent[x] = parent[parent[x]]
			x = parent[x]
		}
		return x
	}
	active := b.order[:0]
	for c := 0; c < nc; c++ {
		if (c < ci && b.m[c] > 0) || c >= ci {
			active = append(active, c)
			parent[c] = c
			if c < ci {
				capc[c] = b.m[c]
			} else {
				capc[c] = len(b.cls[c].members)
			}
		}
	}
	for i, c := range active {
		for _, d := range active[i+1:] {
			if b.wc[c*nc+d] >= t {
				x, y := find(c), find(d)
				if x != y {
					parent[y] = x
					capc[x] += capc[y]
				}
			}
		}
	}
	// Each fixed class with two or more members needs a link >= t that
	// can join them.
	root := -1
	for _, c := range active {
		if c >= ci {
			break
		}
		if b.m[c] >= 2 && b.wc[c*nc+c] < t {
			ok := false
			for _, d := range active {
				if d != c && b.wc[c*nc+d] >= t {
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
	// Nothing fixed yet: some component must hold the whole set.
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
		if !single || b.wc[c*nc+c] >= t || b.size < 2 {
			return true
		}
	}
	return false
}

// rootUB is the first-term bound of the whole search.
func (b *bb) rootUB() int64 {
	saved := b.m
	b.m = make([]int, b.nc)
	ub := int64(0)
	if b.size >= 2 {
		ub = b.bottleneckUB(0, b.size)
	}
	b.m = saved
	return ub
}

// totalUB bounds the total pairwise bandwidth: the fixed pairs, plus for
// each added device its links to the fixed set and half of the best it
// can have to the other added ones, taken greedily.
func (b *bb) totalUB(ci, r int) int64 {
	nc := b.nc
	type cand struct {
		v   int64
		cap int
	}
	var cs [MaxCandidates]cand
	n := 0
	for d := ci; d < nc; d++ {
		// an added device's r-1 partners: up to size-1 of its own class
		// at the class's link, the rest at its best link to another class
		own, other := b.wc[d*nc+d], b.sufInter[ci*nc+d]
		k := 0
		if own > other {
			k = min(len(b.cls[d].members)-1, r-1)
		}
		bd := int64(k)*own + int64(r-1-k)*other
		cs[n] = cand{v: 2*b.eP[d] + bd, cap: len(b.cls[d].members)}
		n++
	}
	list := cs[:n]
	slices.SortFunc(list, func(a, c cand) int {
		switch {
		case a.v > c.v:
			return -1
		case a.v < c.v:
			return 1
		}
		return 0
	})
	sum := 2 * b.pTotal
	rest := r
	for _, c := range list {
		if rest == 0 {
			break
		}
		take := min(rest, c.cap)
		sum += int64(take) * c.v
		rest -= take
	}
	return sum / 2
}

// degreeUB bounds the min cut: no cut is below a fixed device's best
// possible weighted degree.
func (b *bb) degreeUB(ci, r int) int64 {
	nc := b.nc
	ub := int64(math.MaxInt64)
	var ws [MaxCandidates]int64
	var caps [MaxCandidates]int
	for c := 0; c < ci; c++ {
		if b.m[c] == 0 {
			continue
		}
		deg := int64(b.m[c]-1) * b.wc[c*nc+c]
		for d := 0; d < ci; d++ {
			if d != c {
				deg += int64(b.m[d]) * b.wc[c*nc+d]
			}
		}
		// the r best links to classes not yet fixed
		n := 0
		for d := ci; d < nc; d++ {
			ws[n], caps[n] = b.wc[c*nc+d], len(b.cls[d].members)
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

// ringOf is the best ring bottleneck of the set b.m describes. exact is
// false when a threshold above the answer could not be decided; ub is
// then the highest such threshold.
func (b *bb) ringOf(present []int) (ring int64, exact bool, ub int64) {
	nc := b.nc
	if b.size == 2 {
		if len(present) == 1 {
			return b.wc[present[0]*nc+present[0]], true, 0
		}
		return b.wc[present[0]*nc+present[1]], true, 0
	}
	var vals []int64
	for i, c := range present {
		if b.m[c] >= 2 {
			vals = append(vals, b.wc[c*nc+c])
		}
		for _, d := range present[i+1:] {
			vals = append(vals, b.wc[c*nc+d])
		}
	}
	slices.Sort(vals)
	vals = slices.Compact(vals)
	exact, ub = true, -1
	for i := len(vals) - 1; i >= 0; i-- {
		ok, decided := b.hamAt(present, vals[i])
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

// hamAt decides whether the set b.m describes has a Hamiltonian cycle
// over links of at least t. Members of a class are twins: a cycle visits
// a class in runs, each run a path inside the class (which needs the
// class's own link >= t when longer than one device). A dynamic program
// over how many runs each class has had settles it; decided is false when
// that program would be too large.
func (b *bb) hamAt(present []int, t int64) (ok, decided bool) {
	nc := b.nc
	if len(present) == 1 {
		return b.wc[present[0]*nc+present[0]] >= t, true
	}
	// degrees and Dirac's condition
	minDeg := math.MaxInt
	for _, c := range present {
		deg := 0
		if b.wc[c*nc+c] >= t {
			deg += b.m[c] - 1
		}
		for _, d := range present {
			if d != c && b.wc[c*nc+d] >= t {
				deg += b.m[d]
			}
		}
		if deg < 2 {
			return false, true
		}
		minDeg = min(minDeg, deg)
	}
	if 2*minDeg >= b.size {
		return true, true
	}
	// connectivity over classes
	seen := uint64(1)
	stack := []int{0}
	for len(stack) > 0 {
		i := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for j, d := range present {
			if seen>>uint(j)&1 == 0 && b.wc[present[i]*nc+d] >= t {
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
		hi[i] = b.m[c]
		radix[i] = states
		if states > hamStates/(hi[i]+1)/np {
			return false, false
		}
		states *= hi[i] + 1
	}
	adj := make([]uint64, np)
	for i, c := range present {
		for j, d := range present {
			if i != j && b.wc[c*nc+d] >= t {
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
	// Accept end states: class c has exactly m_c runs, or 1..m_c runs when
	// its own link allows runs longer than one device.
	var rec func(i, s int) bool
	rec = func(i, s int) bool {
		if i == np {
			return reach[s]&adj[0] != 0
		}
		c := present[i]
		lo := hi[i]
		if b.wc[c*nc+c] >= t {
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
	cls := p.buildClasses(mask)
	b := p.newBB(cls, 1, time.Hour)
	b.size = bits.OnesCount64(mask)
	for c := range cls {
		b.m[c] = len(cls[c].members)
	}
	present := make([]int, len(cls))
	for c := range present {
		present[c] = c
	}
	ring, exact, _ = b.ringOf(present)
	return ring, p.minCut(maskList(mask)), exact
}
