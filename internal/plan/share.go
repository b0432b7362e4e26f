package plan

import (
	"fmt"
	"slices"

	"github.com/amdrun/amdrun/internal/topology"
)

// Fair CPU shares (issue 34.4). A rank bound exclusive (or core-complex
// on a node with fewer core complexes than devices) does not take every
// free CPU of its NUMA node: each device of the node owns a slot, the
// node's allowed CPUs divided by the node's devices (Spec.NodeDevices:
// every device of the host there, chosen or not), rounded down, at least
// one, the remainder to the lowest devices, in CPU order. A rank's share
// is its devices' slots, so jobs on one node that use different devices
// get disjoint CPUs without knowing of each other; the CPU leases still
// decide. A slot another job took in part (it asked for more with
// Spec.CPUsPerRank) is made up from the node's other free CPUs.

// slot is device d's share of its NUMA node's allowed CPUs, and false
// when the spec says nothing of the node's devices or the node has fewer
// allowed CPUs than devices.
func slot(s Spec, d topology.Device, host map[int]topology.NUMANode, allowed []int) ([]int, bool) {
	peers := s.NodeDevices[d.NUMANode]
	pos := slices.Index(peers, d.Index)
	n, ok := host[d.NUMANode]
	cpus := intersect(n.CPUs, allowed)
	if pos < 0 || !ok || len(cpus) < len(peers) {
		return nil, false
	}
	return chunk(cpus, pos, len(peers)), true
}

// shareAll gives each device rank (its CPUs, in out, being its node
// set's allowed CPUs) its share: the free CPUs of its devices' slots,
// made up to the slots' size (or Spec.CPUsPerRank) from the node set's
// other free CPUs. ok is false when some rank has no slot (the caller
// then splits the node as before); short names the first rank that
// found fewer free CPUs than its slots hold; notes the ranks that got
// fewer than --cpus-per-rank asked.
func shareAll(out []binding, homes []home, s Spec, host map[int]topology.NUMANode, allowed []int) (parts map[int][]int, ok bool, short string, notes []string) {
	want := make([][]int, len(out))
	for lr, h := range homes {
		if out[lr].cpus == nil {
			continue
		}
		if len(h.devs) == 0 {
			return nil, false, "", nil
		}
		for _, d := range h.devs {
			sl, ok := slot(s, d, host, allowed)
			if !ok {
				return nil, false, "", nil
			}
			want[lr] = append(want[lr], sl...)
		}
		slices.Sort(want[lr])
	}
	taken, slots := map[int]bool{}, map[int]int{} // slots: CPU -> the rank whose share holds it
	for _, c := range s.BusyCPUs {
		taken[c] = true
	}
	for lr, w := range want {
		for _, c := range w {
			slots[c] = lr
		}
	}
	parts = map[int][]int{}
	for lr, b := range out {
		if b.cpus == nil {
			continue
		}
		size := len(want[lr])
		if s.CPUsPerRank > 0 {
			size = s.CPUsPerRank
		}
		var got []int
		for _, c := range append(slices.Clone(want[lr]), b.cpus...) {
			other, inSlot := slots[c]
			if len(got) < size && !taken[c] && !slices.Contains(got, c) && (!inSlot || other == lr) {
				got = append(got, c)
			}
		}
		if len(got) < min(size, len(want[lr])) {
			return nil, true, fmt.Sprintf("NUMA node %s (%s of its CPUs %s; local rank %d's share is %d)", topology.JoinInts(b.nodes),
				topology.FormatCPUList(intersect(b.cpus, s.BusyCPUs)), topology.FormatCPUList(b.cpus), lr, len(want[lr])), nil
		}
		if len(got) < size {
			notes = append(notes, fmt.Sprintf("local rank %d got %d", lr, len(got)))
		}
		for _, c := range got {
			taken[c] = true
		}
		slices.Sort(got)
		parts[lr] = got
	}
	return parts, true, "", notes
}

// fewerComplexes says whether some NUMA node with devices has fewer
// level-3 caches among its allowed CPUs than devices: core-complex ranks
// there get fair shares, not a complex each.
func fewerComplexes(s Spec, homes []home, host map[int]topology.NUMANode, allowed []int) bool {
	for _, h := range homes {
		for _, id := range h.nodes {
			units := 0
			for _, l3 := range s.CPUGroups.L3 {
				if len(intersect(intersect(l3, host[id].CPUs), allowed)) > 0 {
					units++
				}
			}
			if units < len(s.NodeDevices[id]) {
				return true
			}
		}
	}
	return false
}
