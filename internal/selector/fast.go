package selector

import (
	"math"
	"slices"

	"github.com/amdrun/amdrun/internal/topology"
)

// settledNaive is Select's choice, the pairs unweighed, where the search
// would end at its root on the naive set (rootSettled): one answer, a
// rootNaive policy, over 16 candidates. From one walk over the links
// (packages) it proves the root's bound is the naive key term by term:
// no component over links above the naive bottleneck holds N devices
// (bottleneckUB); the naive total and locality are half the N largest
// sums of a device's N-1 heaviest links (partSumUB); one NUMA node, none
// busy, one load; the naive devices have the lowest degrees, or the
// split is the N lowest cuts. At most 15 packages, so classes: the root
// costs Work 1. ok is false otherwise (TestSettledNaiveSameAsSearch).
func (pp *Prepared) settledNaive(req Request, p Policy) (*Choice, bool) {
	k, _, work := searchLimits(req)
	if k > 0 || !p.valid() || !p.rules().rootNaive || req.Order != OrderIndex || work <= 1 {
		return nil, false
	}
	cands, size, err := pp.checkRequest(req, p)
	if err != nil || len(cands) <= enumLimit {
		return nil, false
	}
	g, ok := pp.packages(cands, size)
	if !ok {
		return nil, false
	}
	var key key
	ng := len(g.size)
	// a member's want-1 heaviest links (bw, loc), degree and cut
	var heavy [2][16]int64
	var deg, cut [16]int64
	for a := range ng {
		for i, w := range [2][]int64{g.bw, g.loc} {
			heavy[i][a] = g.heaviest(w, a)
		}
		deg[a] = -g.loc[a*ng+a]
		for b := range ng {
			deg[a] += int64(g.size[b]) * g.loc[a*ng+b]
		}
		cut[a] = deg[a] - heavy[1][a]
	}
	if size >= 2 {
		if key[kFirst], ok = g.naiveBottleneck(); !ok {
			return nil, false
		}
		// the total and locality: every naive pair, and their bound
		for i, w := range [2][]int64{g.bw, g.loc} {
			var sum int64
			for a := range ng {
				for b := range ng {
					sum += int64(g.naive[a]*(g.naive[b]-boolInt(a == b))) * w[a*ng+b]
				}
			}
			if sum != g.extreme(heavy[i][:ng], false) {
				return nil, false
			}
			key[kTotal+i] = sum / 2
		}
	}
	var naiveDeg, hiNaive, loRest int64 = 0, math.MinInt64, math.MaxInt64
	for a := range ng {
		naiveDeg += int64(g.naive[a]) * deg[a]
		if g.naive[a] > 0 {
			hiNaive = max(hiNaive, deg[a])
		}
		if g.naive[a] < g.size[a] {
			loRest = min(loRest, deg[a])
		}
	}
	split := 2*key[kLocality] - naiveDeg
	if hiNaive > loRest && -split > g.extreme(cut[:ng], true) {
		return nil, false
	}
	key[kTies], key[kTies+1], key[kTies+2], key[kTies+3] = -1, 0, split, -int64(size)*g.load
	pr, devs := &problem{policy: p, size: size, ties: defaultTies[:]}, append(make([]int, 0, 2*size), cands[:size]...)
	devs = append(devs, devs...)
	return &Choice{Policy: p.String(), Devices: devs[:size:size], Score: pr.score(key), Exact: true, Considered: 1, Work: 1,
		Naive: &Candidate{Devices: devs[size:], Score: pr.score(key)}}, true
}

// packageGraph is the candidates as packages of interchangeable devices.
type packageGraph struct {
	size, naive []int
	bw, loc     []int64
	want        int   // devices per set
	load        int64 // every candidate's
}

// packages groups cands by package in one walk over m's links; ok is
// false unless each package's members are interchangeable, the naive
// devices share a NUMA node and none is busy, all have one load, and
// there are at most 15 packages.
func (pp *Prepared) packages(cands []int, size int) (g packageGraph, ok bool) {
	m := pp.m
	nd, n := len(m.Devices), len(cands)
	ids := make([]int, 3*nd+n+48)
	pkg, hive, code, grp, first := ids[:nd], ids[nd:2*nd], ids[2*nd:3*nd], ids[3*nd:3*nd+n], ids[3*nd+n:3*nd+n:3*nd+n+16]
	intern(pkg, m.Devices, func(d *topology.Device) string { return d.Package })
	intern(hive, m.Devices, func(d *topology.Device) string { return d.Hive })
	for i := range code {
		code[i] = -1
	}
	g.load, g.want = loadOf(&m.Devices[cands[0]]), size
	for i, d := range cands {
		dev := &m.Devices[d]
		switch {
		case i > 0 && pkg[d] >= 0 && pkg[d] == pkg[cands[i-1]]:
			grp[i] = grp[i-1]
		case pkg[d] >= 0 && slices.ContainsFunc(first, func(f int) bool { return pkg[cands[f]] == pkg[d] }):
			return g, false // packages apart: not worth a lookup
		default:
			grp[i], first = len(first), append(first, i)
		}
		f := &m.Devices[cands[first[grp[i]]]]
		if loadOf(dev) != g.load || len(first) > 15 || f.NUMANode != dev.NUMANode || f.Busy != dev.Busy ||
			i < size && (dev.Busy || dev.NUMANode != m.Devices[cands[0]].NUMANode) {
			return g, false
		}
		code[d] = i | grp[i]<<16 | (hive[d]+1)<<24 // one load a device in the walk
	}
	ng := len(first)
	// tab[a*ng+b]: bandwidth<<8 | locality of every link between packages
	// a and b, -1 until seen (one value: interchangeable members)
	tab := make([]int64, 3*ng*ng)
	for i := range tab[:ng*ng] {
		tab[i] = -1
	}
	seen := 0
	for li := range m.Links {
		l := &m.Links[li]
		a, b := l.A, l.B
		if uint(a) >= uint(nd) || uint(b) >= uint(nd) || a == b {
			continue
		}
		ca, cb := code[a], code[b]
		w := m.LinkBW(l)
		if ca < 0 || cb < 0 {
			continue
		} else if l.Measured || w < 0 {
			return g, false // weigh counts measured figures as levels
		}
		gx, gy := ca>>16&255, cb>>16&255
		lc := topology.LocalityPackage // a package of two or more has one
		if gx != gy {
			lc = l.Locality(false, ca>>24 > 0 && ca>>24 == cb>>24)
		}
		v := min(w, math.MaxInt32)<<8 | int64(lc)
		if t := &tab[min(gx, gy)*ng+max(gx, gy)]; *t != v {
			if *t >= 0 {
				return g, false // two members of a package differ: another class
			}
			*t = v
		}
		seen++
	}
	if seen != n*(n-1)/2 {
		return g, false
	}
	g.fill(tab, grp, ids[3*nd+n+16:], ng)
	return g, true
}

// fill sets the sizes and naive members (in rest, 32 ints) of packages
// grp and the links tab holds.
func (g *packageGraph) fill(tab []int64, grp, rest []int, ng int) {
	g.size, g.naive = rest[:ng:ng], rest[16:16+ng]
	for i, a := range grp {
		g.size[a]++
		if i < g.want {
			g.naive[a]++
		}
	}
	g.bw, g.loc = tab[ng*ng:2*ng*ng], tab[2*ng*ng:]
	for a := range ng {
		for b := a; b < ng; b++ {
			v := max(tab[a*ng+b], 0) // none for a package of one
			g.bw[a*ng+b], g.loc[a*ng+b] = v>>8, v&255
			g.bw[b*ng+a], g.loc[b*ng+a] = v>>8, v&255
		}
	}
}

// heaviest sums the want-1 heaviest w (bw, loc) of a member of a.
func (g *packageGraph) heaviest(w []int64, a int) int64 {
	ng := len(g.size)
	need, sum := g.want-1, int64(0)
	var taken [16]bool
	for need > 0 {
		best := -1
		for b := range ng {
			if c := g.size[b] - boolInt(b == a); !taken[b] && c > 0 && (best < 0 || w[a*ng+b] > w[a*ng+best]) {
				best = b
			}
		}
		t := min(need, g.size[best]-boolInt(best == a))
		sum, need, taken[best] = sum+int64(t)*w[a*ng+best], need-t, true
	}
	return sum
}

// extreme sums the want highest (low: lowest) of f, a value a member.
func (g *packageGraph) extreme(f []int64, low bool) int64 {
	var buf [16]capped
	vals, sign := buf[:len(f)], int64(1)
	if low {
		sign = -1
	}
	for a, v := range f {
		vals[a] = capped{sign * v, g.size[a]}
	}
	return sign * takeBest(vals, g.want)
}

// naiveBottleneck is the naive tree bottleneck (Prim's over packages),
// ok when no component over links above it holds want devices.
func (g *packageGraph) naiveBottleneck() (int64, bool) {
	ng := len(g.size)
	var buf [48]int
	parent, sizes, in := buf[:ng], buf[16:16+ng], buf[32:32+ng]
	var best [16]int64
	b, root, left := int64(math.MaxInt64), -1, 0
	for a := range ng {
		if g.naive[a] > 0 {
			in[a], left = 1, left+1
			if root < 0 {
				root, in[a] = a, 0
			}
			best[a] = g.bw[root*ng+a]
		}
	}
	if left == 1 {
		b = g.bw[root*ng+root]
	}
	for ; left > 1; left-- {
		sel := -1
		for a := range ng {
			if in[a] == 1 && (sel < 0 || best[a] > best[sel]) {
				sel = a
			}
		}
		b, in[sel] = min(b, best[sel]), 0
		for a := range ng {
			best[a] = max(best[a], g.bw[sel*ng+a])
		}
	}
	for a := range ng { // the components over links above b
		parent[a] = a
		for c := range a {
			if g.bw[a*ng+c] > b {
				parent[findRoot(parent, a)] = findRoot(parent, c)
			}
		}
	}
	for a := range ng {
		sizes[findRoot(parent, a)] += g.size[a]
	}
	for a := range ng {
		if r := findRoot(parent, a); sizes[r] >= g.want && (sizes[r] > g.size[a] || g.bw[a*ng+a] > b) {
			return b, false
		}
	}
	return b, true
}
