package selector

import (
	"fmt"
	"math/bits"
	"math/rand/v2"
	"testing"
)

// crowdTies is defaultTies with one row changed: the busy term becomes a
// dummy "crowd" term that prefers busy devices. Nothing else is edited:
// the scorer, the branch-and-bound's partial sets and its bounds all
// follow from the row.
func crowdTies() []tieTerm {
	ties := defaultTies
	i := tieSlot("busy") - kTies
	ties[i] = tieTerm{name: "crowd", unit: "devices",
		set: func(p *problem, vs []int, locality int64) int64 {
			return -defaultTies[i].set(p, vs, locality)
		},
		decided: func(b *classSearch, _ int64) int64 { return int64(b.busyCount) },
		// every busy member of classes c.. that r can take
		bound: func(b *classSearch, c, r int, _ int64) int64 {
			return int64(b.busyCount + min(r, b.capFrom[c]-b.idleFrom[c]))
		},
	}
	return ties[:]
}

// The done-when of issue 21 item 4: a tie-break term changed in one
// place (crowdTies) changes enumeration, branch-and-bound and the Score's
// names alike, and both searches still find the optimum that an
// independent brute force (bruteKey with the busy slot negated) finds.
// A search whose bounds ignored the table would prune the busy sets the
// dummy term prefers and miss that optimum.
func TestTieTermTableIsTheOnlyPlace(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 4))
	changed, cases := 0, 0
	for g := 0; g < 60; g++ {
		m := randomNode(t, r, 2+r.IntN(9)) // 2..10 devices
		nc := len(m.Devices)
		cands := firstN(nc).list()
		for _, pol := range []Policy{Tree, Ring} {
			if pol == Ring && nc > 8 {
				continue
			}
			for size := 1; size <= nc; size++ {
				name := fmt.Sprintf("graph %d n=%d policy=%s size=%d", g, nc, pol, size)
				want := &topK{k: 1}
				for mask := uint64(1); mask < 1<<nc; mask++ {
					if bits.OnesCount64(mask) != size {
						continue
					}
					set := bitset{mask}
					k := bruteKey(m, set.list(), cands, pol)
					k[kBusy] = -k[kBusy]
					want.offer(entry{key: k, mask: set})
				}
				crowd := rules{ties: crowdTies()}
				p := newProblem(m, cands, pol, size, crowd)
				if got := p.enumerate(1); !got.exact || got.top[0] != want.e[0] {
					t.Fatalf("%s: enumeration %v, brute force %v", name, got.top, want.e)
				}
				p = newProblem(m, cands, pol, size, crowd)
				got := p.branchAndBound(1)
				if !got.exact || got.top[0] != want.e[0] {
					t.Fatalf("%s: branch-and-bound %v, brute force %v", name, got.top, want.e)
				}
				s := p.score(got.top[0].key)
				if ct, ok := s.Term("crowd"); !ok || ct.Value != float64(got.top[0].key[kBusy]) {
					t.Fatalf("%s: score %v has no crowd term of %d", name, s, got.top[0].key[kBusy])
				}
				if _, ok := s.Term("busy"); ok {
					t.Fatalf("%s: score %v still names busy", name, s)
				}
				// The default table's choice, judged by the dummy term.
				def := newProblem(m, cands, pol, size, rules{}).enumerate(1).top[0]
				cases++
				if def.mask != want.e[0].mask {
					changed++
				}
			}
		}
	}
	if changed == 0 {
		t.Fatalf("the dummy term changed none of %d choices: the test cannot tell", cases)
	}
	t.Logf("the dummy term changed %d of %d choices", changed, cases)
}
