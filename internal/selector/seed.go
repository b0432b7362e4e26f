package selector

// seeds returns sets to offer before the branch-and-bound starts, so that
// it prunes from the first node and, when the budget cuts it short, the
// answer is a good set rather than the first one reached: the naive
// first devices (Select reports their score anyway), then for the ring a
// greedy ring-minded set and a set found by a cycle search (ringSeed),
// and a greedy set grown inside the best connected group. Once the budget
// is spent only the first is offered.
func (p *problem) seeds(b *classSearch) [][]int {
	var out [][]int
	naive := make([]int, p.size)
	for i := range naive {
		naive[i] = i
	}
	out = append(out, naive)
	if p.size < 2 {
		return out
	}
	// The tree bottleneck's bound at the root is exact: some component
	// over links >= t holds the set.
	t, _ := b.bottleneckUB(0, p.size, len(b.levels)-1)
	if p.policy == Ring {
		out = append(out, p.greedy(0, true))
		// The cycle search is for nodes where few devices are
		// interchangeable (the classes of a partitioned node settle its
		// rings far cheaper).
		if p.size >= 3 && len(b.cls) > p.n/2 {
			if s := p.ringSeed(min(t, p.top)); s != nil {
				out = append(out, s)
			}
		}
	}
	return append(out, p.greedy(t, false))
}

// greedy grows a set of p.size devices one at a time. For the tree
// policy (ring false) each new device must link to the set at >= t and
// brings the most bandwidth to it; for the ring it brings the best
// second-best link (a ring needs two), then the most bandwidth. Ties go to
// more locality, less split, then the lowest index. The start is the
// device with the most bandwidth to the candidates that reach it at >= t.
func (p *problem) greedy(t int64, ring bool) []int {
	n := p.n
	p.bud.spend(1 + int64(n*n+n*p.size)/1024)
	in := make([]bool, n)
	sum := make([]int64, n)     // bandwidth to the set
	loc := make([]int64, n)     // locality to the set
	best := make([][2]int64, n) // the best two links to the set
	// components over links >= t: the start must lie in one that can
	// hold the set
	comp := make([]int, n)
	for a := range comp {
		comp[a] = a
	}
	find := func(a int) int {
		for comp[a] != a {
			comp[a] = comp[comp[a]]
			a = comp[a]
		}
		return a
	}
	for a := 0; a < n; a++ {
		for b := a + 1; b < n; b++ {
			if p.bw[a*n+b] >= t {
				comp[find(b)] = find(a)
			}
		}
	}
	compSize := make([]int, n)
	for a := 0; a < n; a++ {
		compSize[find(a)]++
	}
	start, startSum := 0, int64(-1)
	for a := 0; a < n; a++ {
		if compSize[find(a)] < p.size {
			continue
		}
		var s int64
		for b := 0; b < n; b++ {
			if w := p.bw[a*n+b]; b != a && w >= t {
				s += w
			}
		}
		if s > startSum {
			start, startSum = a, s
		}
	}
	set := make([]int, 0, p.size)
	add := func(a int) {
		in[a] = true
		set = append(set, a)
		for b := 0; b < n; b++ {
			w := p.bw[b*n+a]
			sum[b] += w
			loc[b] += p.loc[b*n+a]
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
			// No device reaches the set at >= t (it cannot happen for the
			// exact tree bound); fill by index.
			for b := 0; b < n && next < 0; b++ {
				if !in[b] {
					next = b
				}
			}
		}
		add(next)
	}
	return set
}
