package selector

import (
	"cmp"
	"math"
	"slices"
)

// class is a group of interchangeable candidates: the same link and
// locality to every other candidate, the same NUMA node and busy state.
type class struct {
	members []int // local indices sorted by (load, index)
	numa    int
	busy    bool
	deg     int64 // a member's bandwidth to every other candidate
	// firstMask[m] and firstLoad[m]: the set and summed load of the first
	// m members, those a set taking m of the class uses
	firstMask []bitset
	firstLoad []int64
}

// buildClasses groups the candidates in pool into classes, ordered by
// their lowest index, comparing each device with one member of every
// class, the previous device's class first (a GPU's partitions follow
// one another).
func (p *problem) buildClasses(pool bitset) []class {
	all := pool.list()
	of := make([]int, 2*len(all))       // of[i]: the class of all[i]; then the members
	reps, last := make([]int, 0, 16), 0 // the first member of each class
	for i, v := range all {
		c := len(reps)
		for t := range reps {
			if j := (last + t) % len(reps); p.interchangeable(reps[j], v, all) {
				c = j
				break
			}
		}
		if c == len(reps) {
			reps = append(reps, v)
		}
		of[i], last = c, c
		of[len(all)+c]++ // the classes' sizes, for now
	}
	cls, members, at := make([]class, len(reps)), of[len(all):], 0
	for c, r := range reps {
		cls[c] = class{members: members[at : at : at+members[c]], numa: p.numa[r], busy: p.busy.has(r), deg: p.deg[r]}
		at += members[c]
	}
	for i, v := range all {
		cls[of[i]].members = append(cls[of[i]].members, v)
	}
	// each class's members by load, and its first-member tables
	masks, loads := make([]bitset, len(cls)+len(all)), make([]int64, len(cls)+len(all))
	for c := range cls {
		cl := &cls[c]
		slices.SortFunc(cl.members, func(a, b int) int { return cmp.Or(cmp.Compare(p.load[a], p.load[b]), cmp.Compare(a, b)) })
		k := len(cl.members) + 1
		cl.firstMask, cl.firstLoad = masks[:k:k], loads[:k:k]
		masks, loads = masks[k:], loads[k:]
		for i, v := range cl.members {
			cl.firstMask[i+1] = cl.firstMask[i]
			cl.firstMask[i+1].add(v)
			cl.firstLoad[i+1] = cl.firstLoad[i] + p.load[v]
		}
	}
	return cls
}

// interchangeable says r and v of the pool all have the same NUMA node,
// busy state, and link and locality to every other device of it.
func (p *problem) interchangeable(r, v int, all []int) bool {
	n := p.n
	br, bv, lr, lv := p.bw[r*n:r*n+n], p.bw[v*n:v*n+n], p.loc[r*n:r*n+n], p.loc[v*n:v*n+n]
	for _, u := range all {
		if (br[u] != bv[u] || lr[u] != lv[u]) && u != r && u != v {
			return false
		}
	}
	return p.numa[r] == p.numa[v] && p.busy.has(r) == p.busy.has(v)
}

// classGraph is the links between classes (member to member).
type classGraph struct {
	cls []class
	nc  int     // number of classes
	bw  []int64 // nc*nc; bw[c*nc+c] is class c's internal bandwidth
	loc []int64 // nc*nc locality ranks, the same way
	scr *scratch
}

func newClassGraph(p *problem, cls []class) classGraph {
	nc := len(cls)
	w := make([]int64, 2*nc*nc)
	g := classGraph{cls: cls, nc: nc, bw: w[: nc*nc : nc*nc], loc: w[nc*nc:], scr: p.scr}
	for c := range cls {
		for d := range cls {
			a, b := cls[c].members[0], cls[d].members[0]
			if c == d {
				if len(cls[c].members) < 2 {
					continue
				}
				b = cls[c].members[1]
			}
			g.bw[c*nc+d] = int64(p.bw[a*p.n+b])
			g.loc[c*nc+d] = int64(p.loc[a*p.n+b])
		}
	}
	return g
}

func (g *classGraph) link(c, d int) int64 { return g.bw[c*g.nc+d] }

// treeOf is the tree bottleneck of the set that takes take[c] members of
// each class in present: the class graph's, and for each class of two or
// more the best link that can join them.
func (g *classGraph) treeOf(present, take []int) int64 {
	bn := primBottleneck(g.bw, g.nc, present, g.scr.x, g.scr.f)
	for _, c := range present {
		if take[c] < 2 {
			continue
		}
		j := g.link(c, c)
		for _, d := range present {
			if d != c {
				j = max(j, g.link(c, d))
			}
		}
		bn = min(bn, j)
	}
	return bn
}

// ringUpper is problem.ringUpper for the set treeOf reads.
func (g *classGraph) ringUpper(present, take []int) int64 {
	ub := g.treeOf(present, take)
	for _, c := range present {
		var m top2
		for _, d := range present {
			for range min(take[d]-boolInt(d == c), 2) {
				m.add(g.link(c, d))
			}
		}
		ub = min(ub, m[1])
	}
	return ub
}

// minDegree is the smallest weighted degree of a device of the set.
func (g *classGraph) minDegree(present, take []int) int64 {
	best := int64(math.MaxInt64)
	for _, c := range present {
		deg := int64(take[c]-1) * g.link(c, c)
		for _, d := range present {
			if d != c {
				deg += int64(take[d]) * g.link(c, d)
			}
		}
		best = min(best, deg)
	}
	return best
}
