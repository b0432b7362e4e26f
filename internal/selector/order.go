package selector

import (
	"math"
	"math/bits"
	"slices"
)

// pathOrder orders the set vs (sorted local indices) along a widest
// Hamiltonian path: the largest weakest link, then the largest total,
// then the lexicographically smallest sequence. Sets of more than 16
// devices are ordered class by class (see classOrder).
func (p *problem) pathOrder(vs []int) []int {
	k := len(vs)
	if k <= 2 {
		return append([]int(nil), vs...)
	}
	if k > enumLimit {
		return p.classOrder(vs)
	}
	// the best bottleneck: the largest t with a Hamiltonian path over
	// links >= t
	vals := p.linkValues(nil, vs, math.MaxInt64)
	t := atLeastWeakest(vals, func(t int64) bool { return p.hamPath(vs, t) })
	return p.bestSequence(vs, t, false)
}

// ringOrder orders the set vs along a ring starting at its lowest
// index: for up to 16 devices the best ring (its bottleneck, then its
// total, then the lexicographically smallest sequence); beyond, a ring
// over links of at least t (the set's ring score) found by findCycle,
// or class by class when it finds none.
func (p *problem) ringOrder(vs []int, t int64) []int {
	switch {
	case len(vs) <= bestSequenceLimit:
		return p.bestSequence(vs, t, true)
	case len(vs) <= enumLimit:
		return p.cycleAt(vs, t)
	}
	if c := p.knownRing(vs); c != nil && p.cycleBottleneck(c) >= t {
		// from the set's lowest device
		at := slices.Index(c, slices.Min(c))
		return append(slices.Clone(c[at:]), c[:at]...)
	}
	if c := p.findCycle(vs, t); c != nil {
		return c
	}
	return p.classOrder(vs)
}

// bestSequenceLimit is the most devices bestSequence orders: its table
// has 2^k * k entries, each filled in k steps (12: 0.6 M steps; 16 would
// take 16 M, more than a whole search on most nodes).
const bestSequenceLimit = 12

// cycleAt returns a ring from vs[0] through vs (3..16 devices) over links
// of at least t, which must exist: hamCycle's table, walked back.
func (p *problem) cycleAt(vs []int, t int64) []int {
	k := len(vs)
	var adj [enumLimit]uint32
	p.adjAtLeast(adj[:], vs, t)
	// ends[S]: the devices v such that a path from vs[0] through
	// exactly {0} ∪ S ends at v (S over positions 1..k-1, bit 0 clear).
	full := uint32(1)<<uint(k) - 2
	ends := make([]uint32, full+1)
	for s := uint32(2); s <= full; s += 2 {
		if s&(s-1) == 0 {
			v := bits.TrailingZeros32(s)
			if adj[0]>>uint(v)&1 == 1 {
				ends[s] = s
			}
			continue
		}
		for r := s; r != 0; r &= r - 1 {
			v := bits.TrailingZeros32(r)
			if adj[v]&ends[s&^(1<<uint(v))] != 0 {
				ends[s] |= 1 << uint(v)
			}
		}
	}
	out := make([]int, k)
	out[0] = vs[0]
	s, next := full, uint32(1) // the device after the one to place: 0 closes the ring
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

// hamPath reports whether vs has a Hamiltonian path over links >= t.
func (p *problem) hamPath(vs []int, t int64) bool {
	k := len(vs)
	adj := make([]uint32, k)
	p.adjAtLeast(adj, vs, t)
	dp := make([]uint32, 1<<uint(k))
	for s := uint32(1); s < uint32(len(dp)); s++ {
		if s&(s-1) == 0 {
			dp[s] = s
			continue
		}
		var ends uint32
		for r := s; r != 0; r &= r - 1 {
			v := bits.TrailingZeros32(r)
			if adj[v]&dp[s&^(1<<uint(v))] != 0 {
				ends |= 1 << uint(v)
			}
		}
		dp[s] = ends
	}
	return dp[len(dp)-1] != 0
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
	q.fill()
	return q.walk(vs)
}

// sequenceTable is bestSequence's table: h[S*k+v] is the best total of
// a path that starts at v and covers S (v in S); with cycle, S excludes
// position 0 and the path must end next to 0, the closing link counted.
// -1: none. w is the link between two positions, -1 below t.
type sequenceTable struct {
	k     int
	cycle bool
	w     func(i, j int) int64
	full  uint32
	h     []int64
}

func (q *sequenceTable) fill() {
	k := q.k
	q.full = uint32(1)<<uint(k) - 1
	if q.cycle {
		q.full &^= 1
	}
	q.h = make([]int64, (int(q.full)+1)*k)
	for i := range q.h {
		q.h[i] = -1
	}
	for s := uint32(1); s <= q.full; s++ {
		if s&q.full != s {
			continue
		}
		for r := s; r != 0; r &= r - 1 {
			v := bits.TrailingZeros32(r)
			q.h[int(s)*k+v] = q.best(s, v)
		}
	}
}

// best is the best total of a path from v covering s, from the entries
// of s without v.
func (q *sequenceTable) best(s uint32, v int) int64 {
	rest := s &^ (1 << uint(v))
	best := int64(-1)
	if rest == 0 {
		if !q.cycle {
			best = 0
		} else if c := q.w(v, 0); c >= 0 {
			best = c
		}
		return best
	}
	for r := rest; r != 0; r &= r - 1 {
		u := bits.TrailingZeros32(r)
		if e, g := q.w(v, u), q.h[int(rest)*q.k+u]; e >= 0 && g >= 0 && e+g > best {
			best = e + g
		}
	}
	return best
}

// walk follows the table from the best total back to a sequence, the
// smallest position first at every step.
func (q *sequenceTable) walk(vs []int) []int {
	k, h := q.k, q.h
	var out []int
	s := q.full
	target := int64(-1)
	prev := -1
	if q.cycle {
		out = append(out, vs[0])
		prev = 0
		for r := s; r != 0; r &= r - 1 {
			u := bits.TrailingZeros32(r)
			if e, g := q.w(0, u), h[int(s)*k+u]; e >= 0 && g >= 0 && e+g > target {
				target = e + g
			}
		}
	} else {
		for r := s; r != 0; r &= r - 1 {
			if g := h[int(s)*k+bits.TrailingZeros32(r)]; g > target {
				target = g
			}
		}
	}
	if target < 0 {
		return append([]int(nil), vs...) // unreachable: t is achievable
	}
	for s != 0 {
		next := -1
		for r := s; r != 0; r &= r - 1 {
			u := bits.TrailingZeros32(r)
			g := h[int(s)*k+u]
			if g < 0 {
				continue
			}
			if prev < 0 {
				if g == target {
					next = u
					break
				}
				continue
			}
			if e := q.w(prev, u); e >= 0 && e+g == target {
				next = u
				break
			}
		}
		if next < 0 {
			return append([]int(nil), vs...) // unreachable
		}
		out = append(out, vs[next])
		target = h[int(s)*k+next]
		s &^= 1 << uint(next)
		prev = next
	}
	return out
}

// classOrder orders a large set class by class: members of a class
// (which share every link) stay together in index order, and each next
// class is the one with the widest link to the current one, ties to the
// lowest index. It is a heuristic; on partitioned GPUs it walks each
// GPU's partitions before crossing to the next GPU.
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
