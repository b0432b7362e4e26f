package selector

import "math/bits"

// cycleSteps caps the backtracking steps of one exact cycle search
// (hamSearch); a search that reaches it decides nothing, and the ring
// stays a range (issue 25: beyond 16 devices the ring value used to be a
// heuristic bound that under-reported sets by up to 3.8%).
const cycleSteps = 4096

// cycleSearch is the scratch of hamSearch, kept on the problem so that
// the hot path allocates nothing once it has grown.
type cycleSearch struct {
	k      int
	adj    []bitset // adj[i]: positions j with a link >= t to position i
	path   []int
	start  int
	steps  int
	most   int  // the step cap: cycleSteps, or less when the budget is nearly spent
	failed bool // the step cap was reached

	disc, low, parent []int // biconnected's walk
}

// hamSearch decides whether vs (sorted local indices, 3..MaxCandidates)
// has a Hamiltonian cycle over links of at least t, exactly: a set whose
// threshold graph has a device with fewer than two links, is not
// connected or has a cut vertex has none; otherwise a backtracking
// search extends a path from the device with fewest links, the next
// device forced where a neighbour of the end has no other way into the
// cycle, else the one with the fewest free neighbours, and it prunes a
// path whose free devices cannot close it (one with fewer than two usable
// links, or free devices the end cannot reach). It returns the cycle as
// local indices from vs's first device, and decided false when it reached
// most steps first. The steps are charged to the budget.
func (p *problem) hamSearch(vs []int, t int64, most int) (cycle []int, ok, decided bool) {
	k := len(vs)
	cs := &p.cyc
	cs.k = k
	if cap(cs.adj) < k {
		cs.adj = make([]bitset, k)
	}
	cs.adj = cs.adj[:k]
	start, minDeg := 0, k
	for i, a := range vs {
		cs.adj[i] = bitset{}
		row := p.bw[a*p.n:]
		for j, b := range vs {
			if i != j && row[b] >= t {
				cs.adj[i].add(j)
			}
		}
		d := cs.adj[i].count()
		if d < 2 {
			p.bud.spend(1 + int64(k*k)/1024)
			return nil, false, true
		}
		if d < minDeg {
			start, minDeg = i, d
		}
	}
	p.bud.spend(1 + int64(k*k)/1024)
	if !cs.biconnected() {
		return nil, false, true
	}
	cs.path = append(cs.path[:0], start)
	cs.start, cs.steps, cs.failed = start, 0, false
	cs.most = most
	free := firstN(k)
	free.remove(start)
	found := cs.extend(&free)
	p.bud.spend(int64(1 + cs.steps*k/128))
	if cs.failed {
		return nil, false, false
	}
	if !found {
		return nil, false, true
	}
	// from vs's first device, as ringOrder reports rings
	out := make([]int, k)
	at := 0
	for i, v := range cs.path {
		if v == 0 {
			at = i
		}
	}
	for i := range out {
		out[i] = vs[cs.path[(at+i)%k]]
	}
	return out, true, true
}

// extend tries to complete the path (cs.path, ending at its last device)
// into a Hamiltonian cycle through the free devices.
func (cs *cycleSearch) extend(free *bitset) bool {
	if cs.steps++; cs.steps > cs.most {
		cs.failed = true
		return false
	}
	end := cs.path[len(cs.path)-1]
	if free.count() == 0 {
		return cs.adj[end].has(cs.start)
	}
	// usable: the free devices and the path's two ends
	usable := *free
	usable.add(end)
	usable.add(cs.start)
	forced := -1
	var nb bitset
	for w := range free {
		for x := free[w]; x != 0; x &= x - 1 {
			u := w*64 + bits.TrailingZeros64(x)
			nb = cs.adj[u]
			nb.and(&usable)
			d := nb.count()
			if d < 2 {
				return false
			}
			if d == 2 && nb.has(end) && end != cs.start {
				// u's only other way in is through the end, which has one
				// free side left (the path's first device still has two):
				// it is next
				if forced >= 0 {
					return false
				}
				forced = u
			}
		}
	}
	if !cs.reaches(end, free) {
		return false
	}
	try := func(u int) bool {
		cs.path = append(cs.path, u)
		free.remove(u)
		if cs.extend(free) {
			return true
		}
		free.add(u)
		cs.path = cs.path[:len(cs.path)-1]
		return false
	}
	if forced >= 0 {
		return try(forced)
	}
	// the free neighbours of the end, fewest free neighbours first
	cand := cs.adj[end]
	cand.and(free)
	for cand.count() > 0 && !cs.failed {
		best, bestDeg := -1, 0
		for w := range cand {
			for x := cand[w]; x != 0; x &= x - 1 {
				u := w*64 + bits.TrailingZeros64(x)
				nb = cs.adj[u]
				nb.and(free)
				if d := nb.count(); best < 0 || d < bestDeg {
					best, bestDeg = u, d
				}
			}
		}
		if try(best) {
			return true
		}
		cand.remove(best)
	}
	return false
}

// reaches says whether every free device can be reached from end through
// free devices.
func (cs *cycleSearch) reaches(end int, free *bitset) bool {
	seen := cs.adj[end]
	seen.and(free)
	frontier := seen
	for {
		var next bitset
		for w := range frontier {
			for x := frontier[w]; x != 0; x &= x - 1 {
				next.or(&cs.adj[w*64+bits.TrailingZeros64(x)])
			}
		}
		next.and(free)
		next.andNot(&seen)
		if next == (bitset{}) {
			break
		}
		seen.or(&next)
		frontier = next
	}
	return seen == *free
}

// biconnected says whether the threshold graph over positions 0..k-1 is
// connected and has no cut vertex (a Hamiltonian cycle needs both):
// Tarjan's low-link walk, iterative.
func (cs *cycleSearch) biconnected() bool {
	k := cs.k
	if cap(cs.disc) < k {
		cs.disc, cs.low, cs.parent = make([]int, k), make([]int, k), make([]int, k)
	}
	disc, low, parent := cs.disc[:k], cs.low[:k], cs.parent[:k]
	for i := range disc {
		disc[i], parent[i] = -1, -1
	}
	timer := 0
	rootChildren := 0
	type frame struct {
		v    int
		rest bitset
	}
	stack := []frame{{0, cs.adj[0]}}
	disc[0], low[0] = 0, 0
	timer = 1
	for len(stack) > 0 {
		f := &stack[len(stack)-1]
		u := f.rest.lowest()
		if u < 0 {
			v := f.v
			stack = stack[:len(stack)-1]
			if pv := parent[v]; pv >= 0 {
				low[pv] = min(low[pv], low[v])
				if parent[pv] >= 0 && low[v] >= disc[pv] {
					return false // pv separates v's subtree
				}
			}
			continue
		}
		f.rest.remove(u)
		if disc[u] < 0 {
			parent[u] = f.v
			if f.v == 0 {
				rootChildren++
			}
			disc[u], low[u] = timer, timer
			timer++
			stack = append(stack, frame{u, cs.adj[u]})
		} else if u != parent[f.v] {
			low[f.v] = min(low[f.v], disc[u])
		}
	}
	return timer == k && rootChildren == 1
}
