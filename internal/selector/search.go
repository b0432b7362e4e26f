package selector

import (
	"math/bits"
	"time"
)

// enumLimit is the most candidates searched by plain enumeration of all
// subsets (C(16,8) = 12,870 sets).
const enumLimit = 16

// entry is a scored set of local indices.
type entry struct {
	key  key
	mask uint64
}

// better ranks a above b: higher key, then the lexicographically smaller
// sorted set (the one holding the lowest index where they differ).
func better(a, b entry) bool {
	if c := a.key.cmp(b.key); c != 0 {
		return c > 0
	}
	d := a.mask ^ b.mask
	return d != 0 && a.mask&(d&-d) != 0
}

// topK keeps the k best entries, best first.
type topK struct {
	k int
	e []entry
}

func (t *topK) full() bool { return len(t.e) == t.k }

// worst is the entry a newcomer must beat once the list is full.
func (t *topK) worst() entry { return t.e[len(t.e)-1] }

// offer inserts e if it ranks among the k best.
func (t *topK) offer(e entry) {
	if t.full() && !better(e, t.worst()) {
		return
	}
	i := len(t.e)
	if !t.full() {
		t.e = append(t.e, e)
	} else {
		i--
	}
	for i > 0 && better(e, t.e[i-1]) {
		t.e[i] = t.e[i-1]
		i--
	}
	t.e[i] = e
}

type result struct {
	top        []entry
	exact      bool
	gap        float64
	considered int
}

// search finds the k best sets of p.size candidates.
func (p *problem) search(k int, budget time.Duration) result {
	if p.n <= enumLimit {
		return p.enumerate(k)
	}
	return p.branchAndBound(k, budget)
}

// enumerate scores every subset of p.size of the (at most 16) candidates.
func (p *problem) enumerate(k int) result {
	t := &topK{k: k, e: make([]entry, 0, k)}
	n, r := p.n, p.size
	var buf [enumLimit]int
	count := 0
	last := uint64(1)<<uint(n) - 1
	for mask := uint64(1)<<uint(r) - 1; mask <= last; {
		count++
		vs := buf[:0]
		for m := mask; m != 0; m &= m - 1 {
			vs = append(vs, bits.TrailingZeros64(m))
		}
		p.offerEnum(t, vs, mask)
		// Gosper's hack: next mask with the same number of bits.
		c := mask & -mask
		nx := mask + c
		if nx == 0 || c == 0 {
			break
		}
		mask = (((nx ^ mask) >> 2) / c) | nx
	}
	return result{top: t.e, exact: true, considered: count}
}

// offerEnum scores one set, skipping the costly terms as soon as the
// first term shows it cannot enter the list.
func (p *problem) offerEnum(t *topK, vs []int, mask uint64) {
	var k key
	if len(vs) >= 2 {
		tree := p.treeBottleneck(vs)
		if p.policy == Ring {
			ub := p.ringUpper(vs, tree)
			if t.full() && ub < t.worst().key[0] {
				return
			}
			k[0] = p.ringBottleneck(vs, ub)
			if t.full() && k[0] < t.worst().key[0] {
				return
			}
			// The smallest weighted degree bounds the min cut: skip
			// Stoer-Wagner when even that cannot enter the list.
			k[1] = p.minDegree(vs)
			if t.full() {
				p.tieBreaks(&k, vs, mask)
				if !better(entry{key: k, mask: mask}, t.worst()) {
					return
				}
			}
			k[1] = p.minCut(vs)
		} else {
			if t.full() && tree < t.worst().key[0] {
				return
			}
			k[0] = tree
			k[1] = p.totalBW(vs)
		}
	}
	p.tieBreaks(&k, vs, mask)
	t.offer(entry{key: k, mask: mask})
}

// minDegree is the smallest weighted degree of a device of vs.
func (p *problem) minDegree(vs []int) int64 {
	best := int64(-1)
	for _, a := range vs {
		var d int64
		row := a * p.n
		for _, b := range vs {
			d += p.bw[row+b]
		}
		if best < 0 || d < best {
			best = d
		}
	}
	return best
}
