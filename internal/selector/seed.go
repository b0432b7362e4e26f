package selector

import (
	"slices"
)

// seeds returns sets to offer before the branch-and-bound starts, so
// that it prunes from the first node and a search cut short answers a
// good set: the policy's own, then a greedy set grown inside the best
// connected group.
func (p *problem) seeds(b *classSearch) [][]int {
	var out [][]int
	if p.size < 2 {
		return out
	}
	t, _ := b.bottleneckUB(0, p.size, len(b.levels)-1)
	out = p.policy.rules().seeds(p, b, t)
	return append(out, p.greedy(b, t, false))
}

// greedy grows a set of p.size devices from greedyStart, one at a time:
// for the tree policy the device linking to the set at >= t with the most
// bandwidth to it, for the ring the best second-best link first; ties
// to more locality, less split, the lowest index.
func (p *problem) greedy(b *classSearch, t int64, ring bool) []int {
	n := p.n
	p.bud.spend(1 + int64(n*n+n*p.size)/1024)
	in := make([]bool, n)
	sum := make([]int64, n) // bandwidth to the set
	loc := make([]int64, n) // locality to the set
	best := make([]top2, n) // the best two links to the set
	set := make([]int, 0, p.size)
	add := func(a int) {
		in[a] = true
		set = append(set, a)
		for b := 0; b < n; b++ {
			w := int64(p.bw[b*n+a])
			sum[b] += w
			loc[b] += int64(p.loc[b*n+a])
			best[b].add(w)
		}
	}
	add(b.greedyStart(p.size, t))
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
// links holds size devices (device 0 when none does), found class by
// class.
func (b *classSearch) greedyStart(size int, t int64) int {
	b.components(0, t)
	nc, parent, capc := b.nc, b.p.scr.c, b.p.scr.d
	// each component's best start, by its root
	best, dev := b.p.scr.x[:nc], b.p.scr.a[:nc]
	for c := range best {
		best[c] = -1
	}
	for c := range nc {
		cl := &b.cls[c]
		inner := len(cl.members) > 1 && b.link(c, c) >= t
		var s int64
		linked := false // a link >= t to another class
		for d := range nc {
			if w := b.link(c, d); w >= t && (d != c || inner) {
				s += int64(len(b.cls[d].members)-boolInt(d == c)) * w
				linked = linked || d != c
			}
		}
		root := findRoot(parent, c)
		if (!linked && !inner && 1 < size) || capc[root] < size {
			continue
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
