package selector

import (
	"math"
	"slices"
	"sync"

	"github.com/amdrun/amdrun/internal/topology"
)

// rules switch off terms for comparisons (the job-stream simulation);
// the zero value is what Select uses.
type rules struct {
	noLocality bool      // every locality 0: no locality, no split
	ties       []tieTerm // replaces defaultTies (tests); at most nTies rows
}

// problem is a selection problem over candidates renumbered 0..n-1 in
// ascending device index ("local" indices).
type problem struct {
	policy Policy
	rules  rules
	ties   []tieTerm // the tie-break terms, in ranking order (terms.go)
	n      int       // candidates
	size   int       // devices wanted
	idx    []int     // local -> device index
	bw     []int32   // n*n, 0 on the diagonal; measured figures as levels (Prepare)
	loc    []int8    // n*n locality rank (topology.Locality), 0 on the diagonal
	deg    []int64   // deg[u]: u's locality to every other candidate, summed
	numa   []int     // local -> dense NUMA id (unknown -1 is an id too)
	busy   bitset    // busy candidates
	load   []int64   // hundredths of a percent of utilisation plus memory use
	nNUMA  int
	prep   *Prepared // where the problem came from
	bud    *budget   // the work Select may still spend
	own    budget    // where bud points unless a caller swaps it (no allocation a call)
	scr    *scratch

	evaluated map[bitset]entry // evalSet's answers beyond 16 devices
	rings     map[bitset][]int // the best ring ringSearch found for a set

	// scratch for scoring sets of up to 16 devices
	ham  []uint32
	vals []int64
	sw   []int64
	tg   []bitset // scratch of thresholdGraph
	top  int64    // ring policy, 3 or more devices: ringTop, a bound of every set's ring
}

// scratch is working memory sized to the candidates, made once per
// problem (issue 25: zeroing arrays sized for 256 devices on every call
// was 22% of Select on small nodes). No routine calls another that uses
// the same slices.
type scratch struct {
	a, b, c, d []int
	x, y       []int64
	f, g       []bool
	caps       []capped
}

// scratchIn is a scratch for n candidates in the first 4n ints and 2n
// int64s given.
func scratchIn(ints []int, i64s []int64, n int) *scratch {
	bools := make([]bool, 2*n)
	return &scratch{a: ints[:n:n], b: ints[n : 2*n : 2*n], c: ints[2*n : 3*n : 3*n], d: ints[3*n : 4*n : 4*n],
		x: i64s[:n:n], y: i64s[n : 2*n : 2*n], f: bools[:n:n], g: bools[n:], caps: make([]capped, n)}
}

// newProblem copies the candidates' pairs out of the prepared matrices.
func (pp *Prepared) newProblem(cands []int, pol Policy, size int, r rules) *problem {
	pp.once.Do(pp.weigh)
	m := pp.m
	n := len(cands)
	ints, i64s := make([]int, 5*n), make([]int64, 3*n)
	p := &problem{policy: pol, rules: r, n: n, size: size, idx: cands, numa: ints[4*n:], load: i64s[2*n:], prep: pp,
		own: budget{limit: unlimitedWork}, scr: scratchIn(ints, i64s, n), ties: defaultTies[:]}
	p.bud = &p.own
	if r.ties != nil {
		p.ties = r.ties[:min(len(r.ties), len(defaultTies))]
	}
	if nd := pp.nd; n == nd {
		p.bw, p.loc, p.deg = pp.bw, pp.loc, pp.deg // read-only
	} else {
		p.bw, p.loc, p.deg = make([]int32, n*n), make([]int8, n*n), make([]int64, n)
		for i, a := range cands {
			copy2(p.bw[i*n:i*n+n], pp.bw[a*nd:a*nd+nd], cands)
			copy2(p.loc[i*n:i*n+n], pp.loc[a*nd:a*nd+nd], cands)
			for _, v := range p.loc[i*n : i*n+n] {
				p.deg[i] += int64(v)
			}
		}
	}
	if r.noLocality {
		p.loc, p.deg = make([]int8, n*n), make([]int64, n)
	}
	var idBuf [8]int
	ids := idBuf[:0]
	for i, d := range cands {
		dev := &m.Devices[d]
		id := slices.Index(ids, dev.NUMANode)
		if id < 0 {
			id = len(ids)
			ids = append(ids, dev.NUMANode)
		}
		p.numa[i] = id
		if dev.Busy {
			p.busy.add(i)
		}
		p.load[i] = loadOf(dev)
	}
	p.nNUMA = len(ids)
	return p
}

// copy2 sets dst[i] = row[cands[i]] (one loop copying both matrices and
// summing deg measured 23% slower on 62 of 63 CPX partitions).
func copy2[T int32 | int8](dst, row []T, cands []int) {
	for i, c := range cands {
		dst[i] = row[c]
	}
}

// Prepared is a model read once for many selections: the bandwidth and
// locality of every pair of devices, weighed once. Its Select reads each
// device's state (busy, load, NUMA node) at every call, so those may
// change between calls; the model's devices and links must not (prepare
// it again when they do).
type Prepared struct {
	m   *topology.Model
	nd  int
	bw  []int32 // nd*nd; 0 on the diagonal
	loc []int8  // nd*nd
	deg []int64 // deg[u]: u's locality to every other device, summed

	once sync.Once // weigh, at the first Select that searches
}

// Prepare keeps m for selections; the first Select that searches weighs
// its pairs. A nil or empty model gives a Prepared whose Select fails.
func Prepare(m *topology.Model) *Prepared {
	return &Prepared{m: m}
}

// weigh fills the matrices in one walk over the model's links (no pair
// lookups, issue 25).
func (pp *Prepared) weigh() {
	m := pp.m // not nil: checkRequest refuses a nil model before a problem is made
	nd := len(m.Devices)
	nn := nd * nd
	pp.nd = nd
	pp.bw, pp.loc, pp.deg = make([]int32, nn), make([]int8, nn), make([]int64, nd)
	// packages and hives as small ids, so a pair compares two ints
	ids := make([]int, 2*nd)
	pkg, hive := ids[:nd:nd], ids[nd:]
	intern(pkg, m.Devices, func(d *topology.Device) string { return d.Package })
	intern(hive, m.Devices, func(d *topology.Device) string { return d.Hive })
	// A pair without a link has bandwidth 0 and locality SYS (0), as in
	// Model.BW and Model.Locality; of two links the later wins.
	var levels map[int64]int64
	for li := range m.Links {
		l := &m.Links[li]
		a, b := l.A, l.B
		if a < 0 || b < 0 || a >= nd || b >= nd || a == b {
			continue
		}
		w := m.LinkBW(l) // host-staged for a pair without peer-to-peer access
		if l.Measured {
			if levels == nil {
				levels = measuredLevels(m) // measured figures count as their levels
			}
			w = levels[l.MaxBandwidth]
		}
		w32 := int32(min(w, math.MaxInt32))
		pp.bw[a*nd+b], pp.bw[b*nd+a] = w32, w32
		lc := int8(l.Locality(pkg[a] >= 0 && pkg[a] == pkg[b], hive[a] >= 0 && hive[a] == hive[b]))
		d := int64(lc) - int64(pp.loc[a*nd+b]) // the row sums, less a link replaced
		pp.deg[a], pp.deg[b] = pp.deg[a]+d, pp.deg[b]+d
		pp.loc[a*nd+b], pp.loc[b*nd+a] = lc, lc
	}
}

// intern sets id[i] to a small id of key(&devs[i]), the same for the
// same string, -1 for "" (a node has few packages and hives).
func intern(id []int, devs []topology.Device, key func(*topology.Device) string) {
	var buf [16]string
	seen, last := buf[:0], ""
	for i := range devs {
		k := key(&devs[i])
		if i > 0 && k == last {
			id[i] = id[i-1] // a package's partitions follow one another
			continue
		}
		if id[i] = slices.Index(seen, k); id[i] < 0 && k != "" {
			id[i], seen = len(seen), append(seen, k)
		}
		last = k
	}
}

// loadOf is the device's utilisation plus memory use, in hundredths of a
// percent; unknown (negative) figures count as 0.
func loadOf(d *topology.Device) int64 {
	l := 0.0
	if d.UtilPercent > 0 {
		l += d.UtilPercent
	}
	if d.MemUsedPct > 0 {
		l += d.MemUsedPct
	}
	return int64(math.Round(l * 100))
}

func (p *problem) global(local []int) []int {
	out := make([]int, len(local))
	for i, l := range local {
		out[i] = p.idx[l]
	}
	return out
}

// evalSet scores the set vs (sorted local indices) as an entry; an
// unsettled ring (beyond 16 devices) is the best found, ringHi its bound.
func (p *problem) evalSet(vs []int) (e entry) {
	e.mask = setOf(vs)
	if len(vs) > enumLimit {
		if e, ok := p.evaluated[e.mask]; ok {
			return e
		}
		defer func() {
			if p.evaluated == nil {
				p.evaluated = map[bitset]entry{}
			}
			p.evaluated[e.mask] = e
		}()
	}
	if len(vs) >= 2 {
		var exact bool
		var hi int64
		e.key[kFirst], e.key[kCut], exact, hi = p.policy.rules().eval(p, vs)
		if !exact {
			e.ringHi = hi
		}
		e.key[kTotal] = pairSum(p.bw, p.n, vs)
		e.key[kLocality] = pairSum(p.loc, p.n, vs)
	}
	p.tieBreaks(&e.key, vs)
	return e
}

// treeBottleneck is the smallest edge of the widest spanning tree of vs,
// 0 for fewer than 2 devices.
func (p *problem) treeBottleneck(vs []int) int64 {
	if len(vs) < 2 {
		return 0
	}
	return primBottleneck(p.bw, p.n, vs, p.scr.x, p.scr.f)
}

// primBottleneck is the smallest edge of the widest spanning tree of vs
// in the n*n matrix w (Prim's, in best and in), MaxInt64 for fewer than 2.
func primBottleneck[T int32 | int64](w []T, n int, vs []int, best []int64, in []bool) int64 {
	k, bneck := len(vs), int64(math.MaxInt64)
	if k < 2 {
		return bneck
	}
	clear(in[:k])
	for step, sel := 1, 0; step < k; step++ {
		row, next := vs[sel]*n, -1
		for i := 1; i < k; i++ {
			if b := int64(w[row+vs[i]]); !in[i] && (step == 1 || b > best[i]) {
				best[i] = b
			}
			if !in[i] && (next < 0 || best[i] > best[next]) {
				next = i
			}
		}
		in[next], sel = true, next
		bneck = min(bneck, best[next])
	}
	return bneck
}

// pairSum sums the n*n matrix w over every pair of vs.
func pairSum[T int32 | int8](w []T, n int, vs []int) int64 {
	var s int64
	for i, a := range vs {
		row := a * n
		for _, b := range vs[i+1:] {
			s += int64(w[row+b])
		}
	}
	return s
}

// numaCount is the number of distinct NUMA nodes of vs.
func (p *problem) numaCount(vs []int) int64 {
	seen := p.scr.g[:p.nNUMA]
	clear(seen)
	c := int64(0)
	for _, v := range vs {
		if !seen[p.numa[v]] {
			seen[p.numa[v]] = true
			c++
		}
	}
	return c
}

// minCut is the global minimum cut of vs under link bandwidths
// (Stoer-Wagner). For two devices it is their link; for one, 0.
func (p *problem) minCut(vs []int) int64 {
	k := len(vs)
	if k < 2 {
		return 0
	}
	p.bud.spend(1 + int64(k*k*k)/1024)
	if cap(p.sw) < k*k {
		p.sw = make([]int64, k*k)
	}
	w := p.sw[:k*k]
	for i, a := range vs {
		for j, b := range vs {
			w[i*k+j] = int64(p.bw[a*p.n+b])
		}
	}
	return stoerWagner(w, k, p.scr)
}

// stoerWagner returns the global min cut of the k-vertex graph with
// symmetric weights w (k*k, destroyed), in scr's a, y and f.
func stoerWagner(w []int64, k int, scr *scratch) int64 {
	act := scr.a[:k]
	for i := 0; i < k; i++ {
		act[i] = i
	}
	best := int64(math.MaxInt64)
	wsum, added := scr.y[:k], scr.f[:k]
	for nv := k; nv > 1; nv-- {
		for i := 0; i < nv; i++ {
			wsum[i], added[i] = 0, false
		}
		prev, last := -1, -1
		for step := 0; step < nv; step++ {
			sel := -1
			for i := 0; i < nv; i++ {
				if !added[i] && (sel < 0 || wsum[i] > wsum[sel]) {
					sel = i
				}
			}
			added[sel] = true
			if step == nv-1 {
				best = min(best, wsum[sel])
				last = sel
				break
			}
			prev = sel
			row := act[sel] * k
			for i := 0; i < nv; i++ {
				if !added[i] {
					wsum[i] += w[row+act[i]]
				}
			}
		}
		// merge last into prev
		a, b := act[prev], act[last]
		for i := 0; i < nv; i++ {
			c := act[i]
			w[a*k+c] += w[b*k+c]
			w[c*k+a] = w[a*k+c]
		}
		act[last] = act[nv-1]
	}
	return best
}

// linkValues appends to vals the distinct bandwidths of the links among
// vs that are at most ub, ascending.
func (p *problem) linkValues(vals []int64, vs []int, ub int64) []int64 {
	for i, a := range vs {
		row := a * p.n
		for _, b := range vs[i+1:] {
			if w := int64(p.bw[row+b]); w <= ub {
				vals = append(vals, w)
			}
		}
	}
	slices.Sort(vals)
	return slices.Compact(vals)
}

// largestFeasible is the largest of the ascending vals for which the
// monotone ok holds, and its index (0 and -1 for none), by bisection.
func largestFeasible(vals []int64, ok func(int64) bool) (int64, int) {
	lo, hi := -1, len(vals)-1 // vals[lo] feasible; lo = -1: none found yet
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if ok(vals[mid]) {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	if lo < 0 {
		return 0, -1
	}
	return vals[lo], lo
}

// atLeastWeakest is largestFeasible where vals[0] is known feasible.
func atLeastWeakest(vals []int64, ok func(int64) bool) int64 {
	if t, i := largestFeasible(vals[1:], ok); i >= 0 {
		return t
	}
	return vals[0]
}

// Measured bandwidths are compared in levels (docs/placement.md): a copy
// benchmark varies by a few percent run to run, which would break the
// classes of a partitioned GPU and decide ties by noise. Sorted, a value
// within levelStep of the previous joins its level while the level spans
// at most levelSpan, and counts as the level's median.
const (
	levelStep = 0.025
	levelSpan = 0.10
)

// measuredLevels maps every measured link bandwidth of m to its level's
// value; nil when m has no measured link.
func measuredLevels(m *topology.Model) map[int64]int64 {
	var vals []int64
	for i := range m.Links {
		if l := &m.Links[i]; l.Measured {
			vals = append(vals, l.MaxBandwidth)
		}
	}
	if len(vals) == 0 {
		return nil
	}
	slices.Sort(vals)
	level := make(map[int64]int64, len(vals))
	start := 0
	for i := 1; i <= len(vals); i++ {
		if i < len(vals) && float64(vals[i]) <= float64(vals[i-1])*(1+levelStep) &&
			float64(vals[i]) <= float64(vals[start])*(1+levelSpan) {
			continue
		}
		median := vals[start+(i-1-start)/2]
		for _, v := range vals[start:i] {
			level[v] = median
		}
		start = i
	}
	return level
}
