package selector

import (
	"math/bits"
	"slices"
	"time"
)

// enumLimit is the most candidates searched by enumerating every subset
// (C(16,8) = 12,870 sets), whatever the work budget (issue 35); only the
// time cap stops it.
const enumLimit = 16

// entry is a scored set of local indices; ringHi bounds its ring when
// unsettled, else 0.
type entry struct {
	key    key
	mask   bitset
	ringHi int64
}

// better ranks a above b: higher key, then the lexicographically smaller
// set.
func better(a, b entry) bool {
	if c := a.key.cmp(b.key); c != 0 {
		return c > 0
	}
	return lexLess(&a.mask, &b.mask)
}

// topK keeps the k best entries, best first.
type topK struct {
	k int
	e []entry
}

func (t *topK) full() bool { return len(t.e) == t.k }

// worst is the entry a newcomer must beat once the list is full.
func (t *topK) worst() entry { return t.e[len(t.e)-1] }

// offer inserts e if it ranks among the k best and is not listed yet.
func (t *topK) offer(e entry) {
	if t.full() && !better(e, t.worst()) {
		return
	}
	for i := range t.e {
		if t.e[i].mask == e.mask {
			return
		}
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

// result is what a search found: the best sets, best first, and whether
// the first is proven best; when not, bound is the highest key of what
// is unsettled. capped is Choice.CappedBy.
type result struct {
	top        []entry
	exact      bool
	bound      key
	considered int
	capped     string
}

// search finds the k best sets of p.size candidates within the budget
// p.bud.
func (p *problem) search(k int) result {
	var res result
	if p.n <= enumLimit {
		p.bud.limit = unlimitedWork
		res = p.enumerate(k)
	} else {
		res = p.branchAndBound(k)
	}
	res.capped = p.bud.capped
	return res
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
		p.bud.spend(1)
		if p.bud.spent() { // the time cap: bound the rest by the whole problem
			b := p.newClassSearch(p.buildClasses(firstN(n)), 1)
			u, _ := b.upper(0, r, len(b.levels)-1) // (t.e holds the first set: the clock is read from the 64th)
			return result{top: t.e, considered: count, bound: u, exact: u.cmp(t.e[0].key) <= 0}
		}
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

// offerEnum scores one set, skipping the costly terms once it cannot
// enter the list.
func (p *problem) offerEnum(t *topK, vs []int, mask uint64) {
	var k key
	e := entry{mask: bitset{mask}}
	if len(vs) >= 2 {
		var worst *key
		if t.full() {
			worst = &t.e[len(t.e)-1].key
		}
		var ok bool
		if k[kFirst], k[kCut], ok = p.policy.rules().enum(p, worst, vs); !ok {
			return
		}
		k[kTotal] = pairSum(p.bw, p.n, vs)
		k[kLocality] = pairSum(p.loc, p.n, vs)
		// Below the worst on the pair terms, no tie-break lifts it.
		if t.full() && slices.Compare(k[:kTies], t.e[len(t.e)-1].key[:kTies]) < 0 {
			return
		}
	}
	p.tieBreaks(&k, vs)
	e.key = k
	t.offer(e)
}

// ringEnum is the ring policy's enum: the ring and the min cut of vs,
// each skipped once its bound shows the set cannot enter the list.
func (p *problem) ringEnum(worst *key, vs []int) (first, cut int64, ok bool) {
	ub := p.ringUpper(vs, p.treeBottleneck(vs))
	if worst != nil && ub < worst[kFirst] {
		return 0, 0, false
	}
	first = p.ringOf(vs).lo
	if worst != nil && first < worst[kFirst] {
		return 0, 0, false
	}
	// the smallest weighted degree bounds the min cut
	if worst != nil && p.minDegree(vs) < worst[kCut] && first == worst[kFirst] {
		return 0, 0, false
	}
	return first, p.minCut(vs), true
}

// minDegree is the smallest weighted degree of a device of vs.
func (p *problem) minDegree(vs []int) int64 {
	best := int64(-1)
	for _, a := range vs {
		var d int64
		row := a * p.n
		for _, b := range vs {
			d += int64(p.bw[row+b])
		}
		if best < 0 || d < best {
			best = d
		}
	}
	return best
}

// Work is counted in units of about a thousand elementary steps (a link
// looked at); each costly routine charges what it did, so the answer is a
// function of the input alone (issue 25: with a time budget the same
// request gave different choices on a loaded node).

// DefaultWork is the work Select may spend when Request.Work is 0: on
// all-distinct links the slowest search, a ring of 54 of 64 devices,
// takes 62 ms at it, and every real topology in testdata needs at most
// 2,622 units (TestRealTopologiesExactAtDefaultWork; issue 25,
// docs/performance.md).
const DefaultWork = 10000

// DefaultBudget is the wall-clock safety cap when Request.Budget is 0;
// if it ever fires, Choice.CappedBy says "time".
const DefaultBudget = 2 * time.Second

// Why a search stopped before it proved its answer (Choice.CappedBy).
const (
	CappedByWork = "work"
	CappedByTime = "time"
)

// budget is the work allowance of one Select and its safety cap.
type budget struct {
	work     int64 // spent
	limit    int64
	deadline time.Time
	polls    int
	capped   string // "", CappedByWork or CappedByTime, once spent
}

// spend adds u units of work.
func (b *budget) spend(u int64) { b.work += u }

// spent says whether the search must stop: the work is used up, or (the
// clock read every 64th call) the safety cap has passed. It stays true.
func (b *budget) spent() bool {
	if b.capped != "" {
		return true
	}
	if b.work >= b.limit {
		b.capped = CappedByWork
		return true
	}
	if b.polls++; b.polls&63 == 0 && !b.deadline.IsZero() && time.Now().After(b.deadline) {
		b.capped = CappedByTime
		return true
	}
	return false
}

// unlimitedWork is the limit of a budget that never runs out.
const unlimitedWork = 1 << 62
