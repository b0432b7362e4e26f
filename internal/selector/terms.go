package selector

// The tie-break terms are stated once, here (issue 21): each says how a
// whole set scores it, how the branch-and-bound's decided classes score
// it, and how it bounds every set of a subtree. problem.tieBreaks,
// classSearch.tieKey, classSearch.upper and the Score's names all read
// this table, so changing a tie-break is one edit of one row
// (TestTieTermTableIsTheOnlyPlace shows it with a dummy term).

// tieTerm is one tie-break term: the terms after locality, which need no
// pair of devices. Its value is stored bigger-better (less terms
// negated), in slot kTies+i for row i of the table.
type tieTerm struct {
	name string
	unit string
	less bool  // smaller is better: the slot holds the negated figure
	div  int64 // the Score shows the slot divided by div (0 or 1: as is)

	// set is the term's value for the set vs (sorted local indices),
	// given the set's summed locality. The functions take that figure,
	// not the key: a key passed to a function value escapes to the heap,
	// one allocation per scored set (16 devices, N=4: twice the time).
	set func(p *problem, vs []int, locality int64) int64
	// decided is its value for the members the search has decided, of
	// summed locality locality.
	decided func(b *classSearch, locality int64) int64
	// bound is at least its value for every set in the subtree where
	// classes < c are decided and r more members come from classes c
	// and later, locality bounding their summed locality. The search is
	// exact only while it never underestimates.
	bound func(b *classSearch, c, r int, locality int64) int64

	// A term must be the same for every member of a class of
	// interchangeable devices (classes.go groups by NUMA node, busy and
	// deg; load is kept per member, lowest first), or the classes stop
	// being interchangeable under it.
}

// pairTerms are the terms of pairs of devices each policy ranks by, in
// ranking order, as the Score names them (absent from the score of a
// single device); evalSet, offerEnum,
// classSearch.leaf and classSearch.upper compute them (they share work
// between terms, and the ring's may be inexact, so they are no rows of a
// table of functions).
var pairTerms = [...][]slotTerm{
	Tree: {{kFirst, "bottleneck", "MB/s", false}, {kTotal, "total", "MB/s", false}, {kLocality, "locality", "", false}},
	Ring: {{kFirst, "ring", "MB/s", false}, {kCut, "mincut", "MB/s", false}, {kTotal, "total", "MB/s", false},
		{kLocality, "locality", "", false}},
}

// kTies is the first tie-break slot of a key.
const kTies = kLocality + 1

// nTies is the number of rows of defaultTies, and of tie-break slots in
// a key: the compiler refuses a table with more rows, and every test
// fails on one with fewer (a row without functions).
const nTies = 4

// defaultTies are Select's tie-breaks, in ranking order: fewest NUMA
// nodes, fewest busy devices, least split, least load.
var defaultTies = [nTies]tieTerm{
	{name: "numa", unit: "nodes", less: true,
		set:     func(p *problem, vs []int, _ int64) int64 { return -p.numaCount(vs) },
		decided: func(b *classSearch, _ int64) int64 { return -int64(b.numaNodes) },
		bound:   func(b *classSearch, c, r int, _ int64) int64 { return -int64(b.numaLB(c, r)) },
	},
	{name: "busy", unit: "devices", less: true,
		set: func(p *problem, vs []int, _ int64) int64 {
			var n int64
			for _, v := range vs {
				if p.busy.has(v) {
					n++
				}
			}
			return -n
		},
		decided: func(b *classSearch, _ int64) int64 { return -int64(b.busyCount) },
		// the members past the idle ones are busy
		bound: func(b *classSearch, c, r int, _ int64) int64 { return -int64(b.busyCount + max(0, r-b.idleFrom[c])) },
	},
	// split = (summed locality degrees) - 2 locality: the locality
	// between the set and the candidates it leaves free, negated.
	{name: "split", less: true,
		set: func(p *problem, vs []int, locality int64) int64 {
			if p.rules.noSplit {
				return 0
			}
			var deg int64
			for _, v := range vs {
				deg += p.deg[v]
			}
			return 2*locality - deg
		},
		decided: func(b *classSearch, locality int64) int64 {
			if b.p.rules.noSplit {
				return 0
			}
			return 2*locality - b.degSum
		},
		// the most locality, the least degree; and split is minus the
		// locality each member keeps outside the set, at least its cut
		bound: func(b *classSearch, c, r int, locality int64) int64 {
			if b.p.rules.noSplit {
				return 0
			}
			return min(2*locality-(b.degSum+b.lowDegFrom[c][r]), -(b.cutSum + b.lowCutFrom[c][r]))
		},
	},
	// load: hundredths of a percent of utilisation plus memory use
	{name: "load", unit: "%", less: true, div: 100,
		set: func(p *problem, vs []int, _ int64) int64 {
			var l int64
			for _, v := range vs {
				l += p.load[v]
			}
			return -l
		},
		decided: func(b *classSearch, _ int64) int64 { return -b.loadSum },
		bound:   func(b *classSearch, c, r int, _ int64) int64 { return -(b.loadSum + b.lowLoadFrom[c][r]) },
	},
}

// tieBreaks fills the tie-break slots of k for the set vs. k[kLocality]
// must be set.
func (p *problem) tieBreaks(k *key, vs []int) {
	for i := range p.ties {
		k[kTies+i] = p.ties[i].set(p, vs, k[kLocality])
	}
}

// tieKey fills the slots of k that follow from the decided set's sums.
func (b *classSearch) tieKey(k *key) {
	k[kTotal] = b.total.sum
	k[kLocality] = b.locality.sum
	ties := b.p.ties
	for i := range ties {
		k[kTies+i] = ties[i].decided(b, k[kLocality])
	}
}

// tieBounds fills the tie-break slots of the bound u of the subtree
// (c, r); u's pair terms must be set.
func (b *classSearch) tieBounds(u *key, c, r int) {
	ties := b.p.ties
	for i := range ties {
		u[kTies+i] = ties[i].bound(b, c, r, u[kLocality])
	}
}
