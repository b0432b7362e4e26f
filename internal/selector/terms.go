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

// policyRule is one policy, stated once (issue 21): its name, the pair
// terms its Score shows, and the functions that fill its own slots of a
// key (kFirst, kCut) wherever a set is scored or bounded, and that add
// its own steps to a search. The search, the seeds, the bounds and the
// scorer ask Policy.rules, never compare a Policy with a constant
// (TestPolicyTableIsTheOnlyPlace), so a third policy is one more row of
// policies.
//
// The functions return figures, not keys: a key passed by address to a
// function value escapes to the heap, one allocation per scored set.
type policyRule struct {
	name string
	// pairs are the terms of pairs of devices the policy ranks by, in
	// ranking order, as the Score names them (absent from the score of a
	// single device). Their values are computed by the functions below
	// and, for total and locality, by the callers (they share work
	// between terms, and the ring's may be inexact).
	pairs []slotTerm

	// eval scores a whole set vs of 2 or more devices (sorted local
	// indices): first and cut; exact is false when first is only the
	// best found, and then hi bounds it (evalSet).
	eval func(p *problem, vs []int) (first, cut int64, exact bool, hi int64)
	// enum is eval inside the enumeration of every set, which may stop
	// as soon as the set cannot enter a full list whose worst key is
	// worst (nil while the list is not full): ok false then
	// (offerEnum).
	enum func(p *problem, worst *key, vs []int) (first, cut int64, ok bool)
	// leaf is eval for the branch-and-bound's leaf b.setMask, whose
	// classes with members are present and whose other slots are in k;
	// ok false when the set cannot enter b's list (classSearch.leaf).
	leaf func(b *classSearch, present []int, k key) (first, cut int64, ok bool)
	// first bounds the first term of every set of the subtree (c, r)
	// (classSearch.upper), given tree, a bound of the widest spanning
	// tree's bottleneck. A set's first term is never above its tree
	// bottleneck (the later terms are bounded only over the sets
	// connected over links >= the first's bound: markReach).
	first func(b *classSearch, c, r int, tree int64) int64
	// cut bounds the cut slot of every set of the subtree that reaches
	// the first's bound, given total, one of their total bandwidth.
	cut func(b *classSearch, c, r int, total int64) int64
	// rootNaive says the search's root bounds the first term exactly and
	// spends nothing before its first node, so that settledNaive may
	// answer for it.
	rootNaive bool
	// prepare runs before the branch-and-bound's first node.
	prepare func(p *problem)
	// seeds are the policy's own sets to offer before the
	// branch-and-bound starts, before the greedy set every policy offers;
	// t is the root's bound of the tree bottleneck (problem.seeds).
	seeds func(p *problem, b *classSearch, t int64) [][]int
	// ring orders the chosen set vs, the entry best of the search's
	// result res, along its ring for Choice.Ring; ok false when the
	// policy has no ring for it. It updates best's key and res's
	// exactness and bound to the ring it found (reportRing).
	ring func(p *problem, best *entry, res *result, vs []int) (order []int, ok bool)
}

// policies are the policies, indexed by Policy, default first. Its names
// are PolicyNames.
var policies = []policyRule{
	Tree: {
		name:  "tree",
		pairs: []slotTerm{{kFirst, "bottleneck", "MB/s", false}, {kTotal, "total", "MB/s", false}, {kLocality, "locality", "", false}},
		eval: func(p *problem, vs []int) (int64, int64, bool, int64) {
			return p.treeBottleneck(vs), 0, true, 0
		},
		enum: func(p *problem, worst *key, vs []int) (int64, int64, bool) {
			tree := p.treeBottleneck(vs)
			return tree, 0, worst == nil || tree >= worst[kFirst]
		},
		leaf: func(b *classSearch, present []int, _ key) (int64, int64, bool) {
			return b.treeOf(present, b.take), 0, true
		},
		first:     func(_ *classSearch, _, _ int, tree int64) int64 { return tree },
		cut:       func(*classSearch, int, int, int64) int64 { return 0 },
		rootNaive: true,
		prepare:   func(*problem) {},
		seeds:     func(*problem, *classSearch, int64) [][]int { return nil },
		ring:      func(*problem, *entry, *result, []int) ([]int, bool) { return nil, false },
	},
	Ring: {
		name: "ring",
		pairs: []slotTerm{{kFirst, "ring", "MB/s", false}, {kCut, "mincut", "MB/s", false}, {kTotal, "total", "MB/s", false},
			{kLocality, "locality", "", false}},
		eval: func(p *problem, vs []int) (int64, int64, bool, int64) {
			r := p.ringOf(vs)
			return r.lo, p.minCut(vs), r.exact(), r.hi
		},
		enum:  (*problem).ringEnum,
		leaf:  (*classSearch).ringLeaf,
		first: (*classSearch).ringFirst,
		cut:   (*classSearch).ringCut,
		prepare: func(p *problem) {
			if p.size >= 3 {
				p.top = p.ringTop()
			}
		},
		seeds: (*problem).ringSeeds,
		ring: func(p *problem, best *entry, res *result, vs []int) ([]int, bool) {
			if p.size < 3 {
				return nil, false
			}
			return p.reportRing(best, res, vs), true
		},
	},
}

// rules are the policy's row of policies; p must be valid.
func (p Policy) rules() *policyRule { return &policies[p] }

// policyNames are the policies' names, in the order of the table.
func policyNames() []string {
	names := make([]string, len(policies))
	for i := range policies {
		names[i] = policies[i].name
	}
	return names
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
		set:     func(p *problem, vs []int, locality int64) int64 { return 2*locality - sumAt(p.deg, vs) },
		decided: func(b *classSearch, locality int64) int64 { return 2*locality - b.degSum },
		// the most locality, the least degree; and split is minus the
		// locality each member keeps outside the set, at least its cut
		bound: func(b *classSearch, c, r int, locality int64) int64 {
			return min(2*locality-(b.degSum+b.lowDegFrom[c][r]), -(b.cutSum + b.lowCutFrom[c][r]))
		},
	},
	// load: hundredths of a percent of utilisation plus memory use
	{name: "load", unit: "%", less: true, div: 100,
		set:     func(p *problem, vs []int, _ int64) int64 { return -sumAt(p.load, vs) },
		decided: func(b *classSearch, _ int64) int64 { return -b.loadSum },
		bound:   func(b *classSearch, c, r int, _ int64) int64 { return -(b.loadSum + b.lowLoadFrom[c][r]) },
	},
}

// sumAt sums vals over vs.
func sumAt(vals []int64, vs []int) int64 {
	var s int64
	for _, v := range vs {
		s += vals[v]
	}
	return s
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
