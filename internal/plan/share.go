package plan

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/amdrun/amdrun/internal/topology"
)

// Fair CPU shares (issue 34.4): each device of a NUMA node owns a slot of
// the node's allowed CPUs (Spec.NodeDevices, chosen or not; the remainder
// to the lowest devices), and an exclusive rank's share is its devices'
// slots, so jobs on different devices get disjoint CPUs without knowing
// of each other. A slot another job took in part (CPUsPerRank) is made
// up from the node's other free CPUs.

// slot is device d's slot, false when the node's devices are unknown or
// outnumber its allowed CPUs.
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

// shareAll gives each device rank (out: its node set's allowed CPUs) the
// free CPUs of its slots, made up to their size (or CPUsPerRank) from
// the node set's other free CPUs. ok is false when a rank has no slot;
// short names the first rank short of its slots; notes the ranks that
// got fewer than CPUsPerRank.
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
		size := cmp.Or(max(s.CPUsPerRank, 0), len(want[lr]))
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

// fewerComplexes says whether a NUMA node of homes has fewer level-3
// caches among its allowed CPUs than devices.
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
