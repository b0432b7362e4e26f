package selector

import (
	"math"
	"math/bits"
	"slices"
)

// pathOrder orders the set vs (sorted local indices) along a widest
// Hamiltonian path (then the largest total, the smallest sequence);
// beyond 16 devices class by class (classOrder).
func (p *problem) pathOrder(vs []int) []int {
	k := len(vs)
	if k <= 2 {
		return append([]int(nil), vs...)
	}
	if k > enumLimit {
		return p.classOrder(vs)
	}
	vals := p.linkValues(nil, vs, math.MaxInt64)
	t := atLeastWeakest(vals, func(t int64) bool { // a Hamiltonian path over links >= t
		dp := make([]uint32, 1<<len(vs))
		p.pathEnds(dp, vs, t, false)
		return dp[len(dp)-1] != 0
	})
	return p.bestSequence(vs, t, false)
}

// ringOrder orders the set vs along a ring from its lowest index over
// links >= t (the set's ring score): up to 12 devices the best such
// ring, beyond one found.
func (p *problem) ringOrder(vs []int, t int64) []int {
	switch {
	case len(vs) <= bestSequenceLimit:
		return p.bestSequence(vs, t, true)
	case len(vs) <= enumLimit:
		return p.cycleAt(vs, t)
	}
	if c := p.rings[setOf(vs)]; c != nil && p.cycleBottleneck(c) >= t {
		at := slices.Index(c, slices.Min(c))
		return append(slices.Clone(c[at:]), c[:at]...)
	}
	if c := p.findCycle(vs, t); c != nil {
		return c
	}
	return p.classOrder(vs)
}

// bestSequenceLimit is the most devices bestSequence orders: its table
// takes 2^k * k^2 steps (12: 0.6 M; 16: 16 M, more than a whole search).
const bestSequenceLimit = 12

// cycleAt returns a ring from vs[0] through vs (3..16 devices) over links
// of at least t, which must exist: hamCycle's table, walked back.
func (p *problem) cycleAt(vs []int, t int64) []int {
	k := len(vs)
	ends := make([]uint32, 1<<k)
	adj := p.pathEnds(ends, vs, t, true)
	out := make([]int, k)
	out[0] = vs[0]
	s, next := uint32(len(ends)-1), uint32(1) // the device after the one to place: 0 closes the ring
	for i := k - 1; i >= 1; i-- {
		cand := ends[s] & adj[bits.TrailingZeros32(next)]
		if cand == 0 {
			return append([]int(nil), vs...) // unreachable: t is achievable
		}
		v := bits.TrailingZeros32(cand)
		out[i] = vs[v]
		s &^= 1 << uint(v)
		next = 1 << uint(v)
	}
	return out
}

// bestSequence returns the positions of vs, mapped back to local indices,
// in the order of the path (or, with cycle, the ring from vs[0]) whose
// links are all >= t with the largest total, smallest sequence first.
func (p *problem) bestSequence(vs []int, t int64, cycle bool) []int {
	q := sequenceTable{k: len(vs), cycle: cycle, w: func(i, j int) int64 {
		if b := int64(p.bw[vs[i]*p.n+vs[j]]); b >= t {
			return b
		}
		return -1
	}}
	k := q.k
	q.full = uint32(1)<<uint(k) - 1
	if cycle {
		q.full &^= 1
	}
	q.h = make([]int64, (int(q.full)+1)*k) // a path of one device: 0
	for s := uint32(1); s <= q.full; s++ {
		for r := s; r != 0 && s&q.full == s; r &= r - 1 {
			v := bits.TrailingZeros32(r)
			if rest := s &^ (1 << uint(v)); rest != 0 {
				_, q.h[int(s)*k+v] = q.follow(rest, v)
			} else if cycle {
				q.h[int(s)*k+v] = q.w(v, 0) // the closing link
			}
		}
	}
	return q.walk(vs)
}

// sequenceTable is bestSequence's table: h[S*k+v] is the best total of
// a path from v covering S (with cycle: S without position 0, closing
// at 0), -1 for none. w is the link between positions, -1 below t.
type sequenceTable struct {
	k     int
	cycle bool
	w     func(i, j int) int64
	full  uint32
	h     []int64
}

// follow is the first position u of s with the best total of the link
// from (none when from < 0) and the path from u covering s, and that
// total; -1 for none.
func (q *sequenceTable) follow(s uint32, from int) (next int, best int64) {
	next, best = -1, -1
	for r := s; r != 0; r &= r - 1 {
		u := bits.TrailingZeros32(r)
		e, g := int64(0), q.h[int(s)*q.k+u]
		if from >= 0 {
			e = q.w(from, u)
		}
		if e >= 0 && g >= 0 && e+g > best {
			next, best = u, e+g
		}
	}
	return next, best
}

// walk follows the table back to a sequence, the first best position at
// every step.
func (q *sequenceTable) walk(vs []int) []int {
	var out []int
	s, prev := q.full, -1
	if q.cycle {
		out, prev = append(out, vs[0]), 0
	}
	for s != 0 {
		next, _ := q.follow(s, prev)
		if next < 0 {
			return append([]int(nil), vs...) // unreachable: t is achievable
		}
		out = append(out, vs[next])
		s &^= 1 << uint(next)
		prev = next
	}
	return out
}

// classOrder orders a large set class by class, members in index order,
// each next class the one with the widest link to the current one.
func (p *problem) classOrder(vs []int) []int {
	cls := p.buildClasses(setOf(vs))
	for c := range cls {
		slices.Sort(cls[c].members)
	}
	used := make([]bool, len(cls))
	var out []int
	cur := 0
	for range cls {
		used[cur] = true
		out = append(out, cls[cur].members...)
		next, nb := -1, int64(-1)
		for d := range cls {
			if !used[d] {
				if b := int64(p.bw[cls[cur].members[0]*p.n+cls[d].members[0]]); b > nb {
					next, nb = d, b
				}
			}
		}
		if next < 0 {
			break
		}
		cur = next
	}
	return out
}
