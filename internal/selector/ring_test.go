package selector

import (
	"math/bits"
	"slices"
	"testing"
	"time"

	"github.com/amdrun/amdrun/internal/topology"
)

// Issue 25: the ring Select reports is the ring of a cycle it returns.
// On every K of 64 all-distinct devices (and 128 at a few K) at the
// default work, the score's ring equals the weakest link of
// Choice.Ring, a ring through exactly the chosen devices; and where an
// exact cycle search written here (plain backtracking, its own step
// cap) settles the chosen set at its next link value above the score,
// either it finds no ring there (the score is the set's best ring) or
// the answer says it is not proven: Exact false, the gap on the ring,
// its bound at least the ring found. At the default work every set the
// search here settles is proven best; at 1,000 and 2,000 units the sets
// of 35 and 47 devices are not, and must say so. Before, the score of
// K=59 said 92622 MB/s while Choice.Ring reached 92703.
func TestRingReportedIsHeld(t *testing.T) {
	type tc struct {
		n, work int
		ks      []int
	}
	var all []int
	for k := 3; k <= 64; k++ {
		if !testing.Short() || k%4 == 3 || k == 59 {
			all = append(all, k)
		}
	}
	cases := []tc{{64, 0, all}, {128, 0, []int{17, 40, 64, 100}}, {64, 1000, []int{35, 47}}, {64, 2000, []int{47}}}
	if testing.Short() {
		cases[1].ks = cases[1].ks[:1]
	}
	proven, better, open := 0, 0, 0
	for _, c := range cases {
		m := newDistinctNode(t, c.n, 11)
		for _, k := range c.ks {
			ch, err := Select(m, Request{N: k, Work: c.work, Budget: time.Hour}, Ring)
			if err != nil {
				t.Fatal(err)
			}
			got := int64(ch.Score.Terms[0].Value)
			if ch.Score.Terms[0].Name != "ring" || !sameSet(ch.Ring, ch.Devices) {
				t.Fatalf("n=%d K=%d: score %s, ring %v through %v", c.n, k, ch.Score, ch.Ring, ch.Devices)
			}
			if rb := ringBottleneckOf(m.BW, ch.Ring); rb != got {
				t.Errorf("n=%d K=%d: the score says ring %d, the ring returned reaches %d", c.n, k, got, rb)
			}
			next := nextLinkAbove(m, ch.Devices, got)
			if next < 0 {
				proven++
				continue
			}
			cyc, settled := hamiltonianAt(m, ch.Devices, next, 200000)
			switch {
			case !settled:
				open++
			case cyc == nil:
				proven++
			default:
				better++
				rb := ringBottleneckOf(m.BW, cyc)
				t.Logf("n=%d K=%d work %d: ring %d, the set has one of %d; gap on %s to %.0f", c.n, k, c.work, got, rb, ch.GapTerm, ch.Bound)
				if ch.Exact || ch.GapTerm != "ring" || ch.Bound < float64(rb) {
					t.Errorf("n=%d K=%d work %d: ring %d reported as exact %v (gap on %q, bound %.0f), but the set has a ring of %d",
						c.n, k, c.work, got, ch.Exact, ch.GapTerm, ch.Bound, rb)
				}
			}
		}
	}
	if proven == 0 || better == 0 {
		t.Errorf("%d sets proven best, %d with a better ring: the test shows nothing", proven, better)
	}
	t.Logf("%d sets' rings proven best, %d with a better ring (gap said so), %d not settled here", proven, better, open)
}

// sameSet says a and b hold the same devices, each once.
func sameSet(a, b []int) bool {
	x, y := slices.Clone(a), slices.Clone(b)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(x, y) && len(slices.Compact(x)) == len(a)
}

// nextLinkAbove is the smallest link of the set above t, or -1.
func nextLinkAbove(m *topology.Model, set []int, t int64) int64 {
	next := int64(-1)
	for i, a := range set {
		for _, b := range set[i+1:] {
			if w := m.BW(a, b); w > t && (next < 0 || w < next) {
				next = w
			}
		}
	}
	return next
}

// hamiltonianAt looks for a ring through every device of set over links
// >= t by backtracking from the device with fewest such links, the next
// device the end's neighbour with fewest free neighbours, a path cut when
// a free device has fewer than two usable links. It returns the ring
// (nil when there is none) and whether it decided within steps.
func hamiltonianAt(m *topology.Model, set []int, t int64, steps int) ([]int, bool) {
	k := len(set)
	adj := make([][2]uint64, k)
	for i, a := range set {
		for j, b := range set {
			if i != j && m.BW(a, b) >= t {
				adj[i][j/64] |= 1 << (j % 64)
			}
		}
	}
	count := func(x [2]uint64) int { return bits.OnesCount64(x[0]) + bits.OnesCount64(x[1]) }
	and := func(x, y [2]uint64) [2]uint64 { return [2]uint64{x[0] & y[0], x[1] & y[1]} }
	start := 0
	for i := range adj {
		if count(adj[i]) < 2 {
			return nil, true
		}
		if count(adj[i]) < count(adj[start]) {
			start = i
		}
	}
	var free [2]uint64
	for i := 0; i < k; i++ {
		if i != start {
			free[i/64] |= 1 << (i % 64)
		}
	}
	path := []int{start}
	n := 0
	var walk func() bool
	walk = func() bool {
		if n++; n > steps {
			return false
		}
		end := path[len(path)-1]
		if count(free) == 0 {
			return adj[end][start/64]>>(start%64)&1 == 1
		}
		usable := free
		usable[end/64] |= 1 << (end % 64)
		usable[start/64] |= 1 << (start % 64)
		for i := 0; i < k; i++ {
			if free[i/64]>>(i%64)&1 == 1 && count(and(adj[i], usable)) < 2 {
				return false
			}
		}
		var cand []int
		for i := 0; i < k; i++ {
			if free[i/64]>>(i%64)&1 == 1 && adj[end][i/64]>>(i%64)&1 == 1 {
				cand = append(cand, i)
			}
		}
		slices.SortStableFunc(cand, func(a, b int) int { return count(and(adj[a], free)) - count(and(adj[b], free)) })
		for _, v := range cand {
			free[v/64] &^= 1 << (v % 64)
			path = append(path, v)
			if walk() {
				return true
			}
			path = path[:len(path)-1]
			free[v/64] |= 1 << (v % 64)
			if n > steps {
				return false
			}
		}
		return false
	}
	if walk() {
		out := make([]int, k)
		for i, v := range path {
			out[i] = set[v]
		}
		return out, true
	}
	return nil, n <= steps
}
