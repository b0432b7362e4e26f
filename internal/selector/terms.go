package selector

// The policies and tie-break terms are stated once, here, as table rows
// (issue 21): every scorer and bound reads them, so changing one is one
// edit of one row (TestTieTermTableIsTheOnlyPlace,
// TestPolicyTableIsTheOnlyPlace).

// tieTerm is one tie-break term (after locality), stored bigger-better
// (less terms negated) in slot kTies+i for row i of the table.
type tieTerm struct {
	name string
	unit string
	less bool  // smaller is better: the slot holds the negated figure
	div  int64 // the Score shows the slot divided by div (0 or 1: as is)

	// set is the term's value for the set vs (sorted local indices) of
	// summed locality locality. The functions take that figure, not the
	// key: a key passed to a function value escapes to the heap, one
	// allocation per scored set (16 devices, N=4: twice the time).
	set func(p *problem, vs []int, locality int64) int64
	// decided is its value for the members the search has decided.
	decided func(b *classSearch, locality int64) int64
	// bound is at least its value for every set of the subtree (c, r),
	// locality bounding their summed locality.
	bound func(b *classSearch, c, r int, locality int64) int64
	// A term must be the same for every member of a class (classes.go),
	// or the classes stop being interchangeable under it.
}

// policyRule is one policy: its name, the pair terms its Score shows,
// and the functions that fill its own key slots (kFirst, kCut) wherever
// a set is scored or bounded. Nothing else compares a Policy with a
// constant, so a third policy is one more row of policies. The functions
// return figures, not keys, for the same reason as tieTerm's.
type policyRule struct {
	name string
	// pairs are the pair terms the policy ranks by, in ranking order, as
	// the Score names them (absent for a single device).
	pairs []slotTerm

	// eval scores a set vs of 2 or more devices: exact is false when
	// first is only the best found, and then hi bounds it (evalSet).
	eval func(p *problem, vs []int) (first, cut int64, exact bool, hi int64)
	// enum is eval in the enumeration; ok false when the set cannot
	// enter a list whose worst key is worst (nil: not full).
	enum func(p *problem, worst *key, vs []int) (first, cut int64, ok bool)
	// leaf is eval for the branch-and-bound's leaf b.setMask, its other
	// slots in k; ok false when the set cannot enter b's list.
	leaf func(b *classSearch, present []int, k key) (first, cut int64, ok bool)
	// first bounds the first term of every set of the subtree (c, r),
	// given tree, a bound of its widest spanning tree's bottleneck.
	first func(b *classSearch, c, r int, tree int64) int64
	// cut bounds the cut slot of the subtree's sets that reach first's
	// bound, given total, a bound of their total bandwidth.
	cut func(b *classSearch, c, r int, total int64) int64
	// rootNaive says the search's root bounds the first term exactly and
	// spends nothing before its first node (settledNaive may answer).
	rootNaive bool
	// prepare runs before the branch-and-bound's first node.
	prepare func(p *problem)
	// seeds are the policy's own sets to offer before the search, given
	// the root's bound t of the tree bottleneck (problem.seeds).
	seeds func(p *problem, b *classSearch, t int64) [][]int
	// ring orders the chosen set vs along its ring for Choice.Ring (ok
	// false: no ring), settling best's key and res (reportRing).
	ring func(p *problem, best *entry, res *result, vs []int) (order []int, ok bool)
}

// policies are the policies, indexed by Policy, default first.
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
		enum: (*problem).ringEnum,
		leaf: (*classSearch).ringLeaf,
		first: func(b *classSearch, _, _ int, tree int64) int64 {
			if b.p.top > 0 { // ringTop, set for 3 or more devices
				return min(tree, b.p.top)
			}
			return tree
		},
		// at most the smallest degree, at most the mean degree
		cut: func(b *classSearch, c, r int, total int64) int64 { return min(b.degreeUB(c, r), 2*total/int64(b.size)) },
		prepare: func(p *problem) {
			if p.size >= 3 {
				p.top = p.ringTop()
			}
		},
		seeds: func(p *problem, b *classSearch, _ int64) [][]int { return [][]int{p.greedy(b, 0, true)} },
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

// nTies is the number of rows of defaultTies and of tie-break slots in
// a key.
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

// tieBreaks fills the tie-break slots of k (k[kLocality] set) for vs.
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

// tieBounds fills the tie-break slots of the bound u (pair terms set) of
// the subtree (c, r).
func (b *classSearch) tieBounds(u *key, c, r int) {
	ties := b.p.ties
	for i := range ties {
		u[kTies+i] = ties[i].bound(b, c, r, u[kLocality])
	}
}
