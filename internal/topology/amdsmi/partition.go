package amdsmi

import (
	"slices"
	"sort"
	"strings"

	"github.com/amdrun/amdrun/internal/topology"
)

// Partitioned MI300X (issue 24): each GPU shows as 2 to 8 devices on its
// next PCI functions; `amd-smi topology` may list only the physical GPUs.

// slotOf returns the bus and device of a PCI address ("0000:05:00"), or "".
func slotOf(bdf string) string {
	i := strings.LastIndexByte(bdf, '.')
	if i < 0 {
		return ""
	}
	return bdf[:i]
}

// JoinPartitions returns t with one row per device of gpus, in index
// order, when gpus lists t's GPUs and further PCI functions of them. Each
// partition inherits its GPU's links; partitions of one GPU are joined by
// one-hop XGMI. Otherwise it returns t and false.
func JoinPartitions(t *Topology, gpus []GPU) (*Topology, bool) {
	row, bySlot := map[string]int{}, map[string]int{}
	for i, b := range t.BDFs {
		if _, dup := bySlot[slotOf(b)]; b == "" || dup {
			return t, false // an address unknown, or t lists partitions itself
		}
		row[b], bySlot[slotOf(b)] = i, i
	}
	seen, extra := map[string]bool{}, false
	for _, g := range gpus {
		_, inT := row[g.BDF]
		if _, inSlot := bySlot[slotOf(g.BDF)]; g.BDF == "" || seen[g.BDF] || !inSlot {
			return t, false
		}
		seen[g.BDF], extra = true, extra || !inT
	}
	if !extra || len(gpus) > MaxGPUs || slices.ContainsFunc(t.BDFs, func(b string) bool { return !seen[b] }) {
		return t, false
	}
	logical := slices.Clone(gpus)
	sort.SliceStable(logical, func(a, b int) bool { return logical[a].Index < logical[b].Index })
	n := len(logical)
	j := newTopology(n)
	j.Tables = t.Tables
	parent := make([]int, n)
	for i, g := range logical {
		j.GPUs[i], j.BDFs[i], parent[i] = g.Index, g.BDF, bySlot[slotOf(g.BDF)]
	}
	for a := 0; a < n; a++ {
		for b := 0; b < n; b++ {
			pa, pb := parent[a], parent[b]
			j.Pairs[a][b] = t.Pairs[pa][pb]
			if a != b && pa == pb {
				j.Pairs[a][b] = Pair{Access: "ENABLED", Weight: -1, Hops: 1, Type: topology.TypeXGMI}
			}
		}
	}
	return j, true
}
