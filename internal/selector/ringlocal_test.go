package selector

import (
	"slices"
	"testing"
	"time"

	"github.com/amdrun/amdrun/internal/topology"
)

// Issue 25: the ring choice of every K of 64 all-distinct devices at the
// default work budget, against an upper bound of the optimum computed
// here from the links alone: a ring of K devices over links >= t lies in
// one connected part of the 2-core of that graph, so the largest t at
// which such a part holds K devices bounds every K-set's ring. Before
// the local search (improveRing, liftRing) the worst K was 4.4% below
// it (K=31; K=54 2.2%); with it and one seed 1.20% (K=49; K=60, 61
// 1.1%); with three seeds raised and the chosen ring settled, 0.92%
// (K=54). The issue asks for 1% of the optimum; the test asks 1% of this
// bound, which is at least the optimum.
func TestRingSweepNearBound(t *testing.T) {
	const n = 64
	m := newDistinctNode(t, n, 11)
	worst, worstK := 0.0, 0
	for k := 3; k <= n; k++ {
		if testing.Short() && k%4 != 0 {
			continue
		}
		ch, err := Select(m, Request{N: k, Budget: time.Hour}, Ring)
		if err != nil {
			t.Fatal(err)
		}
		got := int64(ch.Score.Terms[0].Value)
		// the ring reaches the score (a ring search cut short may
		// report less than the order it returns reaches)
		if ringBottleneckOf(m.BW, ch.Ring) < got || len(ch.Ring) != k {
			t.Fatalf("K=%d: ring %v does not reach %d", k, ch.Ring, got)
		}
		ub := ringCoreBound(m, k)
		if got > ub {
			t.Fatalf("K=%d: ring %d above the bound %d", k, got, ub)
		}
		gap := float64(ub-got) / float64(ub)
		if gap > worst {
			worst, worstK = gap, k
		}
		if gap > 0.01 {
			t.Errorf("K=%d: ring %d is %.2f%% below the bound %d", k, got, 100*gap, ub)
		}
	}
	t.Logf("worst K=%d, %.2f%% below the bound", worstK, 100*worst)
}

// ringCoreBound is the largest link value t at which the 2-core of the
// graph of links >= t has a connected part of at least k devices.
func ringCoreBound(m *topology.Model, k int) int64 {
	n := len(m.Devices)
	var vals []int64
	for a := 0; a < n; a++ {
		for b := a + 1; b < n; b++ {
			vals = append(vals, m.BW(a, b))
		}
	}
	slices.Sort(vals)
	for i := len(vals) - 1; i >= 0; i-- {
		t := vals[i]
		in := make([]bool, n)
		for a := range in {
			in[a] = true
		}
		for changed := true; changed; {
			changed = false
			for a := 0; a < n; a++ {
				d := 0
				for b := 0; b < n; b++ {
					if b != a && in[b] && m.BW(a, b) >= t {
						d++
					}
				}
				if in[a] && d < 2 {
					in[a], changed = false, true
				}
			}
		}
		seen := make([]bool, n)
		for s := 0; s < n; s++ {
			if !in[s] || seen[s] {
				continue
			}
			size, q := 0, []int{s}
			seen[s] = true
			for len(q) > 0 {
				a := q[0]
				q = q[1:]
				size++
				for b := 0; b < n; b++ {
					if in[b] && !seen[b] && b != a && m.BW(a, b) >= t {
						seen[b] = true
						q = append(q, b)
					}
				}
			}
			if size >= k {
				return t
			}
		}
	}
	return 0
}
