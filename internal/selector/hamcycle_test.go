package selector

import (
	"math/rand/v2"
	"testing"
)

// hamSearch, the exact cycle search for rings over more than 16 devices,
// agrees with the subset table (hamCycle) wherever both run: on random
// sets of 4-16 devices at every link value of the set, a decided answer
// is the table's, and a cycle it returns is a ring over links >= t
// through every device once.
func TestHamSearchAgreesWithTable(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 25))
	graphs := 400
	if testing.Short() {
		graphs = 40
	}
	decided, cycles := 0, 0
	for g := 0; g < graphs; g++ {
		n := 4 + r.IntN(13)
		levels := []int64{25000, 50000, 100000, 200000, 400000}
		m := newFlatNode(t, n, func(a, b int) int64 { return levels[(a*7+b*13+g*5+r.IntN(3))%len(levels)] }, func(i int) int { return i % 2 })
		p := newProblem(m, firstN(n).list(), Ring, n, rules{})
		vs := firstN(n).list()
		for _, th := range p.linkValues(nil, vs, 1<<62) {
			want := p.hamCycle(vs, th)
			cyc, ok, dec := p.hamSearch(vs, th, 1<<20)
			if !dec {
				continue
			}
			decided++
			if ok != want {
				t.Fatalf("graph %d (%d devices) t=%d: hamSearch %v, table %v", g, n, th, ok, want)
			}
			if !ok {
				continue
			}
			cycles++
			seen := map[int]bool{}
			for i, v := range cyc {
				w := cyc[(i+1)%len(cyc)]
				if seen[v] || p.bw[v*n+w] < th {
					t.Fatalf("graph %d t=%d: %v is not a ring over links >= t", g, th, cyc)
				}
				seen[v] = true
			}
			if len(seen) != n || cyc[0] != vs[0] {
				t.Fatalf("graph %d t=%d: %v does not start at %d through all %d devices", g, th, cyc, vs[0], n)
			}
		}
	}
	if decided == 0 || cycles == 0 || cycles == decided {
		t.Fatalf("%d decided, %d with a cycle: the test shows nothing", decided, cycles)
	}
	t.Logf("%d thresholds decided, %d with a cycle", decided, cycles)
}
