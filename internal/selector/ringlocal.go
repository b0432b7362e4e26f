package selector

// improveRing raises the bottleneck of a ring of p.size candidates (cyc,
// local indices in ring order) by local search: while some move
// replaces the ring's weakest link by links all stronger than it, it
// makes the one whose new links are strongest. The moves: reverse a
// stretch (2-opt: the weakest link and another become two new links);
// swap an end of the weakest link for a device off the ring; insert a
// device off the ring into the weakest link and drop another device of
// the ring (its neighbours joined); drop an end of the weakest link (the
// ring closed past it) and insert it or a device off the ring into
// another link. Each pass looks at every pair of a device and a link
// once and is charged to the budget, so the result depends on the input
// alone. With keep the set stays: only the moves within it (2-opt, an
// end moved into another link). Issue 25: on 64 all-distinct devices the
// cycle search alone left rings up to 4.4% below the bound.
func (p *problem) improveRing(cyc []int, keep bool) []int {
	k, n := len(cyc), p.n
	if k < 5 {
		return cyc
	}
	w := func(a, b int) int64 { return p.bw[a*n+b] }
	c := append([]int(nil), cyc...)
	on := make([]bool, n)
	for _, v := range c {
		on[v] = true
	}
	next := make([]int, 0, k)
	for !p.bud.spent() {
		p.bud.spend(1 + int64(2*n*k)/1024)
		i, b := 0, w(c[0], c[1])
		for j := 1; j < k; j++ {
			if x := w(c[j], c[(j+1)%k]); x < b {
				i, b = j, x
			}
		}
		best, mv := p.bestRingMove(c, on, i, b, keep)
		at := func(j int) int { return c[((j%k)+k)%k] }
		if best <= b {
			break
		}
		next = mv.apply(next[:0], at, i, k)
		if !p.validRing(next, b) {
			break
		}
		for _, v := range c {
			on[v] = false
		}
		c = append(c[:0], next...)
		for _, v := range c {
			on[v] = true
		}
	}
	return c
}

// bestRingMove is improveRing's best move from ring c (on marks its
// devices) whose weakest link, of bandwidth b, is (c[i], c[i+1]): the
// strongest of the moves that improveRing's doc lists, and b with no
// move when none beats it.
func (p *problem) bestRingMove(c []int, on []bool, i int, b int64, keep bool) (int64, ringMove) {
	k, n := len(c), p.n
	w := func(a, b int) int64 { return p.bw[a*n+b] }
	at := func(j int) int { return c[((j%k)+k)%k] }
	e0, e1 := at(i), at(i+1) // the weakest link
	best, mv := b, ringMove{}
	try := func(score int64, m ringMove) {
		if score > best {
			best, mv = score, m
		}
	}
	// 2-opt: links (e0,e1) and (at(i+d),at(i+d+1)) become
	// (e0,at(i+d)) and (e1,at(i+d+1)), the stretch e1..at(i+d)
	// reversed.
	for d := 2; d < k-1; d++ {
		try(min(w(e0, at(i+d)), w(e1, at(i+d+1))), ringMove{kind: moveReverse, d: d})
	}
	// a device y off the ring: swap an end for it, or insert it into
	// the weakest link and drop the device of the ring whose
	// neighbours link best.
	dropAt, dropW := -1, int64(-1)
	for d := 2; d < k; d++ { // at(i+d), d in 2..k-1, is neither end
		if x := w(at(i+d-1), at(i+d+1)); x > dropW {
			dropAt, dropW = d, x
		}
	}
	for y := 0; y < n; y++ {
		if on[y] || keep {
			continue
		}
		try(min(w(at(i-1), y), w(y, e1)), ringMove{kind: moveSwap, d: 0, z: y})
		try(min(w(e0, y), w(y, at(i+2))), ringMove{kind: moveSwap, d: 1, z: y})
		try(min(w(e0, y), w(y, e1), dropW), ringMove{kind: moveInsertDrop, d: dropAt, z: y})
	}
	// drop an end (its neighbours joined) and insert it or a device
	// off the ring into another link of what is left.
	for end := 0; end < 2; end++ {
		pos := i + end // the dropped device is at(pos)
		join := w(at(pos-1), at(pos+1))
		if join <= best {
			continue
		}
		for d := 1; d < k-1; d++ { // the link (at(pos+d), at(pos+d+1)) of the rest
			a, bb := at(pos+d), at(pos+d+1)
			for z := 0; z < n; z++ {
				if (!on[z] && !keep) || z == at(pos) {
					try(min(join, w(a, z), w(z, bb)), ringMove{kind: moveDropInsert, end: end, d: d, z: z})
				}
			}
		}
	}
	return best, mv
}

// ringMove is a move of improveRing, relative to the weakest link
// (at(i), at(i+1)).
type ringMove struct {
	kind   int
	d, end int
	z      int // the device moved in
}

const (
	moveReverse    = iota // reverse at(i+1..i+d)
	moveSwap              // at(i+d) (d 0 or 1) replaced by z
	moveInsertDrop        // z between at(i) and at(i+1), at(i+d) dropped
	moveDropInsert        // at(i+end) dropped, z after at(i+end+d)
)

// apply appends the ring after the move to buf.
func (m ringMove) apply(buf []int, at func(int) int, i, k int) []int {
	switch m.kind {
	case moveReverse:
		buf = append(buf, at(i))
		for s := m.d; s >= 1; s-- {
			buf = append(buf, at(i+s))
		}
		for s := m.d + 1; s < k; s++ {
			buf = append(buf, at(i+s))
		}
	case moveSwap:
		for s := 0; s < k; s++ {
			if s == m.d {
				buf = append(buf, m.z)
			} else {
				buf = append(buf, at(i+s))
			}
		}
	case moveInsertDrop:
		buf = append(buf, at(i), m.z)
		for s := 1; s < k; s++ {
			if s != m.d {
				buf = append(buf, at(i+s))
			}
		}
	case moveDropInsert:
		pos := i + m.end
		for s := 1; s <= m.d; s++ {
			buf = append(buf, at(pos+s))
		}
		buf = append(buf, m.z)
		for s := m.d + 1; s < k; s++ {
			buf = append(buf, at(pos+s))
		}
	}
	return buf
}

// validRing says c is a ring of p.size distinct candidates whose weakest
// link is stronger than b (a move the local search made is checked).
func (p *problem) validRing(c []int, b int64) bool {
	if len(c) != p.size {
		return false
	}
	seen := map[int]bool{}
	for j, v := range c {
		if v < 0 || v >= p.n || seen[v] || p.bw[v*p.n+c[(j+1)%len(c)]] <= b {
			return false
		}
		seen[v] = true
	}
	return true
}

// liftRing raises the bottleneck b of the ring c (local indices in ring
// order) one threshold at a time: the ring without its weakest link is
// a path over links > b, which a walk of at most 16·len(c) steps turns
// back into a ring over such links, rotating the path at an end (Pósa)
// or sliding it onto a device off the ring (the other end dropped), the
// ends taking turns, until the ends link or a crossing closes it. It
// stops at the first threshold the walk does not close, or when the
// work reaches stop or the budget is spent. With keep the walk only
// rotates: the set stays.
func (p *problem) liftRing(c []int, stop int64, keep bool) []int {
	k, n := len(c), p.n
	if k < 4 {
		return c
	}
	w := func(a, b int) int64 { return p.bw[a*n+b] }
	pos := make([]int, n)
	path := make([]int, k)
	var opts []int
	for p.bud.work < stop && !p.bud.spent() {
		b := p.cycleBottleneck(c)
		i := 0
		for j := range c {
			if w(c[j], c[(j+1)%k]) == b {
				i = j
				break
			}
		}
		closed := false
		for try := 0; try < liftTries && !closed; try++ {
			closed = p.liftWalk(c, path, pos, &opts, i, b, try, stop, keep)
		}
		if !closed || !p.validRing(path, b) {
			break
		}
		c = append(c[:0:0], path...)
	}
	return c
}

// liftWalk is one walk of liftRing: path is c from the far end of its
// weakest link (at i, value b); try varies the choices. It reports
// whether path became a ring over links > b.
func (p *problem) liftWalk(c, path, pos []int, optsp *[]int, i int, b int64, try int, stop int64, keep bool) bool {
	k := len(c)
	opts := *optsp
	defer func() { *optsp = opts }()
	p.bud.spend(1)
	acc := 0
	for j := range path {
		path[j] = c[(i+1+j)%k]
	}
	for v := range pos {
		pos[v] = -1
	}
	for j, v := range path {
		pos[v] = j
	}
	steps := 16 * k
	for s := 0; s < steps; s++ {
		if p.closeWalk(path, pos, b) {
			return true
		}
		opts = p.walkOptions(opts[:0], path, pos, b, keep)
		// a step looks at about 3k+n links (a unit is about 1024)
		if acc += 3*k + p.n; acc >= 1024 {
			p.bud.spend(int64(acc / 1024))
			acc %= 1024
		}
		if len(opts) > 0 {
			o := opts[(s/2*(1+2*try)+try)%len(opts)]
			if o < k {
				reversePath(path, pos, o+1)
			} else {
				slidePath(path, pos, o-k)
			}
		}
		// the ends take turns
		reversePath(path, pos, 0)
		if p.bud.work >= stop || p.bud.spent() {
			break
		}
	}
	return false
}

// closeWalk closes liftWalk's path into a ring over links > b where its
// ends link so, or where a rotation makes them (path[j] linking the end
// and path[j+1] the start: the stretch after j reversed), and reports
// whether it did.
func (p *problem) closeWalk(path, pos []int, b int64) bool {
	k, n := len(path), p.n
	w := func(a, b int) int64 { return p.bw[a*n+b] }
	end, start := path[k-1], path[0]
	if w(end, start) > b {
		return true
	}
	for j := 1; j < k-2; j++ {
		if w(path[j], end) > b && w(path[j+1], start) > b {
			reversePath(path, pos, j+1)
			return true
		}
	}
	return false
}

// walkOptions appends the options at the path's end, its links > b: a
// rotation (a neighbour on the path, coded as its position) or, unless
// keep, a slide (a device off the path, coded as len(path) + device).
func (p *problem) walkOptions(opts, path, pos []int, b int64, keep bool) []int {
	k, n := len(path), p.n
	end := path[k-1]
	for v := 0; v < n; v++ {
		if v == end || p.bw[end*n+v] <= b {
			continue
		}
		if j := pos[v]; j < 0 {
			if !keep {
				opts = append(opts, k+v)
			}
		} else if j < k-2 {
			opts = append(opts, j)
		}
	}
	return opts
}

// reversePath reverses path from position from to its end, pos (a
// device's position, -1 off the path) following.
func reversePath(path, pos []int, from int) {
	k := len(path)
	for l, r := from, k-1; l < r; l, r = l+1, r-1 {
		path[l], path[r] = path[r], path[l]
	}
	for j := from; j < k; j++ {
		pos[path[j]] = j
	}
}

// slidePath drops the path's start and appends v, a device off it.
func slidePath(path, pos []int, v int) {
	k := len(path)
	pos[path[0]] = -1
	copy(path, path[1:])
	path[k-1] = v
	for j, u := range path {
		pos[u] = j
	}
}

// liftTries is how many walks liftRing tries at one threshold.
const liftTries = 4

// raiseRing alternates improveRing and liftRing on the ring c while
// either raises its bottleneck and the work stays under stop; with keep
// the ring keeps its set.
func (p *problem) raiseRing(c []int, stop int64, keep bool) []int {
	for b := int64(-1); p.bud.work < stop && !p.bud.spent(); {
		c = p.liftRing(p.improveRing(c, keep), stop, keep)
		nb := p.cycleBottleneck(c)
		if nb <= b {
			break
		}
		b = nb
	}
	return c
}
