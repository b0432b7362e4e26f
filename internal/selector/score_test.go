package selector

import (
	"testing"
)

// local maps device indices to a problem over all devices of m.
func allProblem(t *testing.T, pol Policy, size int) *problem {
	t.Helper()
	m := newMI250Node(t)
	all := []int{0, 1, 2, 3, 4, 5, 6, 7}
	return newProblem(m, all, pol, size, rules{})
}

func TestSetScores(t *testing.T) {
	p := allProblem(t, Ring, 4)
	tests := []struct {
		set                    []int
		tree, total, ring, cut int64
		numa                   int64
	}{
		{[]int{0, 1}, 200000, 200000, 200000, 200000, 1},
		{[]int{0, 6}, 100000, 100000, 100000, 100000, 2},
		{[]int{0, 3}, 32000, 32000, 32000, 32000, 1},
		// 1-6, 0-7 and 1-7 cross NUMA nodes over the host: SYS, 16000
		{[]int{0, 1, 6}, 100000, 316000, 16000, 116000, 2},
		{[]int{0, 1, 6, 7}, 100000, 548000, 16000, 100000 + 3*16000, 2},
		{[]int{0, 1, 2, 3}, 50000, 564000, 50000, 164000, 1},
		// all 8: every device has exactly three direct links
		{[]int{0, 1, 2, 3, 4, 5, 6, 7}, 50000, 1300000 + 4*32000 + 12*16000, 50000, 0, 2},
	}
	for _, tt := range tests {
		if got := p.treeBottleneck(tt.set); got != tt.tree {
			t.Errorf("%v: tree bottleneck %d, want %d", tt.set, got, tt.tree)
		}
		if got := pairSum(p.bw, p.n, tt.set); got != tt.total {
			t.Errorf("%v: total %d, want %d", tt.set, got, tt.total)
		}
		ub := p.ringUpper(tt.set, p.treeBottleneck(tt.set))
		if got := p.ringOf(tt.set).lo; got != tt.ring {
			t.Errorf("%v: ring %d (upper %d), want %d", tt.set, got, ub, tt.ring)
		}
		if len(tt.set) < 8 {
			if got := p.minCut(tt.set); got != tt.cut {
				t.Errorf("%v: min cut %d, want %d", tt.set, got, tt.cut)
			}
		}
		if got := p.numaCount(tt.set); got != tt.numa {
			t.Errorf("%v: NUMA nodes %d, want %d", tt.set, got, tt.numa)
		}
	}
}

func TestStoerWagner(t *testing.T) {
	// the classic example of Stoer and Wagner's paper: min cut 4
	edges := [][3]int64{{0, 1, 2}, {0, 4, 3}, {1, 2, 3}, {1, 4, 2}, {1, 5, 2}, {2, 3, 4},
		{2, 6, 2}, {3, 6, 2}, {3, 7, 2}, {4, 5, 3}, {5, 6, 1}, {6, 7, 3}}
	w := make([]int64, 64)
	for _, e := range edges {
		w[e[0]*8+e[1]], w[e[1]*8+e[0]] = e[2], e[2]
	}
	if got := stoerWagner(w, 8, scratchIn(make([]int, 32), make([]int64, 16), 8)); got != 4 {
		t.Errorf("min cut %d, want 4", got)
	}
}

func TestScoreString(t *testing.T) {
	s := Tree.Score(newMI250Node(t), Request{}, []int{6, 0, 1, 6})
	if got := s.String(); got != "bottleneck 100000 MB/s, total 316000 MB/s, locality 12, numa 2 nodes, busy 0 devices, split 33, load 0 %" {
		t.Errorf("String %q", got)
	}
	if n, ok := s.Term("numa"); !ok || n.Value != -2 || n.Natural() != 2 || !n.Less {
		t.Errorf("numa term %+v", n)
	}
	one := Tree.Score(newMI250Node(t), Request{}, []int{3})
	if got := one.String(); got != "numa 1 nodes, busy 0 devices, split 19, load 0 %" {
		t.Errorf("N=1 %q", got)
	}
	a := Score{Terms: []Term{{Name: "x", Value: 2}, {Name: "y", Value: -1, Less: true}}}
	b := Score{Terms: []Term{{Name: "x", Value: 2}, {Name: "y", Value: -3, Less: true}}}
	if a.Compare(b) != 1 || b.Compare(a) != -1 || a.Compare(a) != 0 {
		t.Errorf("Compare")
	}
	if got := (Term{Name: "load", Value: -12.5, Unit: "%", Less: true}).String(); got != "load 12.50 %" {
		t.Errorf("term %q", got)
	}
}
