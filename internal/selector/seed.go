package selector

import (
	"slices"
)

// seeds returns sets to offer, after the naive first devices (Select
// reports their score anyway), before the branch-and-bound starts, so
// that it prunes from the first node and, when the budget cuts it short,
// the answer is a good set rather than the first one reached: the
// policy's own (policyRule.seeds; for the ring, ringSeeds), then a greedy
// set grown inside the best connected group.
func (p *problem) seeds(b *classSearch) [][]int {
	var out [][]int
	if p.size < 2 {
		return out
	}
	// The tree bottleneck's bound at the root is exact: some component
	// over links >= t holds the set.
	t, _ := b.bottleneckUB(0, p.size, len(b.levels)-1)
	out = p.policy.rules().seeds(p, b, t)
	return append(out, p.greedy(&b.classGraph, t, false))
}

// ringSeeds are the ring policy's seeds: a greedy ring-minded set.
func (p *problem) ringSeeds(b *classSearch, _ int64) [][]int {
	return [][]int{p.greedy(&b.classGraph, 0, true)}
}

// greedy grows a set of p.size devices one at a time. For the tree
// policy (ring false) each new device must link to the set at >= t and
// brings the most bandwidth to it; for the ring it brings the best
// second-best link (a ring needs two), then the most bandwidth. Ties go to
// more locality, less split, then the lowest index. The start is the
// device with the most bandwidth to the candidates that reach it at >= t
// (greedyStart, on g, the classes of every candidate).
func (p *problem) greedy(g *classGraph, t int64, ring bool) []int {
	return p.greedyFrom(greedyStart(g, p.size, t), t, ring)
}

// greedyFrom is greedy from the device start.
func (p *problem) greedyFrom(start int, t int64, ring bool) []int {
	n := p.n
	p.bud.spend(1 + int64(n*n+n*p.size)/1024)
	in := make([]bool, n)
	sum := make([]int64, n)     // bandwidth to the set
	loc := make([]int64, n)     // locality to the set
	best := make([][2]int64, n) // the best two links to the set
	set := make([]int, 0, p.size)
	add := func(a int) {
		in[a] = true
		set = append(set, a)
		for b := 0; b < n; b++ {
			w := int64(p.bw[b*n+a])
			sum[b] += w
			loc[b] += int64(p.loc[b*n+a])
			switch {
			case w > best[b][0]:
				best[b] = [2]int64{w, best[b][0]}
			case w > best[b][1]:
				best[b][1] = w
			}
		}
	}
	add(start)
	for len(set) < p.size {
		next := -1
		var nk [4]int64
		for b := 0; b < n; b++ {
			if in[b] || (!ring && best[b][0] < t) {
				continue
			}
			k := [4]int64{0, sum[b], loc[b], -p.deg[b]}
			if ring {
				k[0] = best[b][1]
				if len(set) == 1 {
					k[0] = best[b][0]
				}
			}
			if next < 0 || k[0] > nk[0] || (k[0] == nk[0] && (k[1] > nk[1] || (k[1] == nk[1] && (k[2] > nk[2] || (k[2] == nk[2] && k[3] > nk[3]))))) {
				next, nk = b, k
			}
		}
		if next < 0 {
			next = slices.Index(in, false) // none at >= t (not for the exact tree bound)
		}
		add(next)
	}
	return set
}

// greedyStart is the lowest device with the most bandwidth, over links
// >= t, to the other candidates, among those whose component over such
// links holds size devices (device 0 when none does). Members of a class
// are alike in both, so it looks at classes: their components over
// links >= t, where a class whose members link to no other class at
// >= t is one component if its members link to each other at >= t, and
// each member its own otherwise.
func greedyStart(g *classGraph, size int, t int64) int {
	nc := g.nc
	parent, capc := g.scr.c[:nc], g.scr.d[:nc]
	linked := g.scr.f[:nc] // a link >= t to another class
	for c := range parent {
		parent[c], capc[c], linked[c] = c, len(g.cls[c].members), false
	}
	for c := 0; c < nc; c++ {
		for d := c + 1; d < nc; d++ {
			if g.link(c, d) >= t {
				linked[c], linked[d] = true, true
				if x, y := findRoot(parent, c), findRoot(parent, d); x != y {
					parent[y] = x
					capc[x] += capc[y]
				}
			}
		}
	}
	// each component's best start, by its root
	best, dev := g.scr.x[:nc], g.scr.a[:nc]
	for c := range best {
		best[c] = -1
	}
	for c := 0; c < nc; c++ {
		cl := &g.cls[c]
		inner := len(cl.members) > 1 && g.link(c, c) >= t
		root := findRoot(parent, c)
		if (!linked[c] && !inner && 1 < size) || capc[root] < size {
			continue
		}
		var s int64
		for d := 0; d < nc; d++ {
			if w := g.link(c, d); w >= t && (d != c || inner) {
				others := len(g.cls[d].members)
				if d == c {
					others--
				}
				s += int64(others) * w
			}
		}
		if s > best[root] { // classes go by their lowest member
			best[root], dev[root] = s, slices.Min(cl.members)
		}
	}
	start, sum := 0, int64(-1)
	for root := range best {
		if best[root] > sum || (best[root] == sum && sum >= 0 && dev[root] < start) {
			start, sum = dev[root], best[root]
		}
	}
	return start
}
