package selector

import (
	"cmp"
	"math/bits"
	"slices"
)

// seedSteps caps the steps of one threshold's cycle search in ringSeed.
const seedSteps = 2000

// ringSeed looks for sets of p.size candidates with a high ring and
// returns up to three rings (local indices in ring order), each a start
// for the local search (raiseRing): the ring at the largest link value t
// (binary search over the candidates' link values at most ub) at which
// denseCycle finds one; the same with cycleOfLength first and denseCycle
// when it fails; and one above the best of those two, cycleOfLength
// probing from the next value up (climbRing). Starts from different
// searches raise to different rings: on 64 all-distinct devices the best
// of the three was up to 0.8% above the one start seeded before. The
// branch-and-bound classes of an all-distinct node are single devices and
// its bound rarely prunes, so without this seed the ring of a large set
// was the greedy one (issue 25: 1-13% below the optimum on 32-256
// all-distinct devices). The searches may spend a quarter of the budget,
// then a fifth and an eighth of what is left; the branch-and-bound needs
// the rest.
func (p *problem) ringSeed(ub int64) [][]int {
	all := firstN(p.n).list()
	vals := p.linkValues(nil, all, ub)
	stop := p.bud.work + (p.bud.limit-p.bud.work)/4
	search := func(find func(int64) []int) (best []int) {
		lo, hi := 0, len(vals)-1
		for lo <= hi && p.bud.work < stop && !p.bud.spent() {
			mid := (lo + hi) / 2
			if c := find(vals[mid]); c != nil {
				best, lo = c, mid+1
			} else {
				hi = mid - 1
			}
		}
		return best
	}
	dense := search(p.denseCycle)
	stop = max(stop, p.bud.work+(p.bud.limit-p.bud.work)/5)
	deep := search(func(t int64) []int {
		if c := p.cycleOfLength(t); c != nil {
			return c
		}
		return p.denseCycle(t)
	})
	var out [][]int
	for _, c := range [][]int{dense, deep} {
		if c != nil {
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		return nil
	}
	best := slices.MaxFunc(out, func(a, b []int) int { return cmp.Compare(p.cycleBottleneck(a), p.cycleBottleneck(b)) })
	stop = max(stop, p.bud.work+(p.bud.limit-p.bud.work)/8)
	if c := p.climbRing(vals, p.cycleBottleneck(best), stop); c != nil {
		out = append(out, c)
	}
	return out
}

// climbRing looks for a ring (cycleOfLength) over links >= the values
// above b, from the lowest up in steps that double while it finds rings
// and start again at one after a miss (a probe that finds none costs the
// most), while the work is under stop. It returns the best ring found
// or nil.
func (p *problem) climbRing(vals []int64, b int64, stop int64) []int {
	i, _ := slices.BinarySearch(vals, b+1)
	var best []int
	lo, hi, step := i, len(vals)-1, 1
	for lo <= hi && p.bud.work < stop && !p.bud.spent() {
		mid := min(lo+step-1, hi)
		c := p.cycleOfLength(vals[mid])
		if c == nil {
			hi, step = mid-1, 1
			continue
		}
		j, _ := slices.BinarySearch(vals, p.cycleBottleneck(c))
		best, lo, step = c, max(mid, j)+1, 2*step
	}
	return best
}

// denseCycle looks for a ring of p.size candidates over links >= t in a
// dense part of that graph: the largest connected part of its 2-core,
// peeled down to p.size devices by removing the device with the fewest
// links in what is left (the highest index of those), then findCycle:
// the ring in order, or nil, which proves nothing.
func (p *problem) denseCycle(t int64) []int {
	adj := p.thresholdGraph(t)
	set := twoCore(adj, firstN(p.n))
	var part bitset
	for rest := set; rest != (bitset{}); {
		pt := reach(adj, rest.lowest(), rest)
		if pt.count() > part.count() {
			part = pt
		}
		rest.andNot(&pt)
	}
	if part.count() < p.size {
		return nil
	}
	for part.count() > p.size {
		worst, wd := -1, 0
		for _, v := range part.list() {
			nb := adj[v]
			nb.and(&part)
			if d := nb.count(); worst < 0 || d <= wd {
				worst, wd = v, d
			}
		}
		part.remove(worst)
	}
	p.bud.spend(1 + int64(p.n*p.n)/1024)
	return p.findCycle(part.list(), t)
}

// ringTop bounds the ring of every set of p.size (3 or more)
// candidates: the largest link value t at which the 2-core of the graph
// of links >= t (what is left after removing devices with fewer than two
// links, repeatedly) has a connected part of at least p.size devices; a
// ring lies in one.
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

// thresholdGraph is the candidates' graph of links >= t, as adjacency
// bitsets (the problem's scratch, valid until the next call).
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
			if b != a && w >= t {
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

// cycleOfLength looks for a cycle of exactly p.size candidates over links
// >= t: inside each connected part of the 2-core, from each start device
// (the cycle's lowest), a depth-first path search over higher devices
// that prunes a path whose end cannot gather enough devices or get back
// to the start in the steps left. It returns the ring in order, or nil
// after seedSteps steps, which proves nothing.
func (p *problem) cycleOfLength(t int64) []int {
	adj := p.thresholdGraph(t)
	core := twoCore(adj, firstN(p.n))
	size := p.size
	c := cycleWalk{adj: adj, size: size, most: int(min(seedSteps, 1+p.bud.left()*128/int64(p.n))),
		dist: make([]int, p.n), path: make([]int, 0, size), opts: make([][]int, size)}
	defer func() { p.bud.spend(1 + int64(c.steps*p.n)/128) }()
	for _, s := range core.list() {
		// the devices the cycle may use: s and higher ones of the core
		allowed := core
		for v := 0; v < s; v++ {
			allowed.remove(v)
		}
		part := reach(adj, s, allowed)
		if part.count() < size {
			continue
		}
		bfsDist(adj, s, part, c.dist)
		c.start, c.path = s, append(c.path[:0], s)
		c.free = part
		c.free.remove(s)
		if c.dfs() {
			return slices.Clone(c.path)
		}
		if c.steps > c.most {
			return nil
		}
	}
	return nil
}

// cycleWalk is cycleOfLength's depth-first search for a cycle of size
// devices from start over adj, at most most steps.
type cycleWalk struct {
	adj         []bitset
	size, start int
	steps, most int
	dist        []int // links to the start
	path        []int
	free        bitset  // devices of the start's part not on the path
	opts        [][]int // opts[d]: the choices at path length d
}

func (c *cycleWalk) dfs() bool {
	if c.steps++; c.steps > c.most {
		return false
	}
	end := c.path[len(c.path)-1]
	if len(c.path) == c.size {
		return c.adj[end].has(c.start)
	}
	left := c.size - len(c.path) // devices still to add
	for _, v := range c.next(end, left) {
		c.free.remove(v)
		c.path = append(c.path, v)
		// v must still reach left-1 free devices
		r := c.free
		r.add(v)
		if left == 1 || reach(c.adj, v, r).count() > left-1 {
			if c.dfs() {
				return true
			}
		}
		c.path = c.path[:len(c.path)-1]
		c.free.add(v)
		if c.steps > c.most {
			return false
		}
	}
	return false
}

// next lists the end's free neighbours from which the start is at most
// left links away, fewest free neighbours first (Warnsdorff).
func (c *cycleWalk) next(end, left int) []int {
	nb := c.adj[end]
	nb.and(&c.free)
	o := c.opts[len(c.path)][:0]
	for w := range nb {
		for x := nb[w]; x != 0; x &= x - 1 {
			if v := w*64 + bits.TrailingZeros64(x); c.dist[v] <= left {
				o = append(o, v)
			}
		}
	}
	c.opts[len(c.path)] = o
	slices.SortFunc(o, func(a, b int) int {
		x, y := c.adj[a], c.adj[b]
		x.and(&c.free)
		y.and(&c.free)
		return x.count() - y.count()
	})
	return o
}

// bfsDist fills dist[v] with the number of links from s to v inside set
// (len(dist) + 1 for those it cannot reach).
func bfsDist(adj []bitset, s int, set bitset, dist []int) {
	for i := range dist {
		dist[i] = len(dist) + 1
	}
	dist[s] = 0
	var seen bitset
	seen.add(s)
	frontier := seen
	for d := 1; frontier != (bitset{}); d++ {
		var next bitset
		for w := range frontier {
			for x := frontier[w]; x != 0; x &= x - 1 {
				next.or(&adj[w*64+bits.TrailingZeros64(x)])
			}
		}
		next.and(&set)
		next.andNot(&seen)
		for _, v := range next.list() {
			dist[v] = d
		}
		seen.or(&next)
		frontier = next
	}
}
