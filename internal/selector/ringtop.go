package selector

import "math/bits"

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
