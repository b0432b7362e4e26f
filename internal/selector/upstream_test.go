package selector

// The placement rules of three other launchers and allocators, written
// again from their source for the placement report (report_test.go). None
// of their code is copied; each rule cites the file and commit it follows.
// They see our finished model, so each says how it maps the model onto the
// inputs its tool reads; the report runs each on its own vendor's nodes.

import (
	"fmt"
	"math"

	"github.com/amdrun/amdrun/internal/topology"
)

// optimumAMDPick is optimum-amd's amdrun (huggingface/optimum-amd,
// optimum/amd/topology_utils.py at commit fa22eca40472598aed508a8cbd3512
// 50d3ddbc31): get_bandwidth_matrix takes amdsmi_get_minmax_bandwidth's
// max_bandwidth for each pair, which amd-smi reports for XGMI links only
// (here: the model's XGMI and NVLink links); a pair without one gets, in
// the same i, j pass that fills the matrix, the best min(b[i][k], b[k][j])
// over relays k whose entries are set so far, else 0.
// extract_max_avg_bandwidth_cluster then walks itertools.combinations in
// order and keeps the first cluster whose mean off-diagonal bandwidth is
// strictly above the best so far (starting at 0), so it has no answer
// (ok false; the CLI then crashes joining None) when every mean is 0, and
// for one device it answers [0]. The report does not run it beyond 16
// devices: the walk over every combination would not end.
func optimumAMDPick(m *topology.Model, k int) ([]int, bool) {
	n := len(m.Devices)
	if k == 1 {
		return []int{0}, true
	}
	const unset = -1.0
	b := make([][]float64, n)
	for i := range b {
		b[i] = make([]float64, n)
		for j := range b[i] {
			b[i][j] = unset
			if i == j {
				b[i][j] = math.Inf(1)
			} else if l := m.Link(i, j); l.Type != topology.LinkPCIe && l.Direct {
				b[i][j] = float64(l.MaxBandwidth)
			}
		}
	}
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			if b[i][j] != unset {
				continue
			}
			best := 0.0
			for r := 0; r < n; r++ {
				if r == i || r == j || b[i][r] == unset || b[r][j] == unset {
					continue
				}
				if v := math.Min(b[i][r], b[r][j]); v > best {
					b[i][j], best = v, v
				}
			}
		}
	}
	for i := range b {
		for j := range b[i] {
			if b[i][j] == unset {
				b[i][j] = 0
			}
		}
	}
	var pick []int
	bestMean := 0.0
	combinations(n, k, func(c []int) {
		var sum float64
		for _, i := range c {
			for _, j := range c {
				if i != j {
					sum += b[i][j]
				}
			}
		}
		if mean := sum / float64(k*(k-1)); mean > bestMean {
			bestMean, pick = mean, append([]int(nil), c...)
		}
	})
	return pick, pick != nil
}

// combinations calls f with every k-subset of 0..n-1 in lexicographic
// order (itertools.combinations' order); f must not keep c.
func combinations(n, k int, f func(c []int)) {
	c := make([]int, k)
	for i := range c {
		c[i] = i
	}
	for {
		f(c)
		i := k - 1
		for i >= 0 && c[i] == n-k+i {
			i--
		}
		if i < 0 {
			return
		}
		c[i]++
		for j := i + 1; j < k; j++ {
			c[j] = c[j-1] + 1
		}
	}
}

// gpuAllocatorScore is go-gpuallocator's calculateGPUPairScore
// (NVIDIA/go-gpuallocator, gpuallocator/besteffort_policy.go at commit
// 876e7b7609bb839919e4eb06ce00607db76e907e): the PCIe path of a pair
// scores SYS 10, NODE 20, PHB 30, PXB 40, PIX 50, and each NVLink adds
// 100. nvidia-smi topo -m does not print the PCIe path of an NVLink pair,
// so it counts as NODE on one NUMA node and SYS across two; an XGMI link
// counts as one NVLink per 50 GB/s (topology.XGMILinkBandwidth).
func gpuAllocatorScore(m *topology.Model, a, b int) int {
	l := m.Link(a, b)
	pcie := map[string]int{topology.LevelSYS: 10, topology.LevelNODE: 20, topology.LevelPHB: 30,
		topology.LevelPXB: 40, topology.LevelPIX: 50}
	switch l.Type {
	case topology.LinkNVLink:
		return 100*max(l.Count, 1) + fabricPCIe(m, a, b)
	case topology.LinkXGMI:
		return 100*max(int(l.MaxBandwidth/topology.XGMILinkBandwidth), 1) + fabricPCIe(m, a, b)
	}
	if s, ok := pcie[l.Level]; ok {
		return s
	}
	return 30 // an AMD source's "PCIE": through the host bridge
}

func fabricPCIe(m *topology.Model, a, b int) int {
	na, nb := m.Devices[a].NUMANode, m.Devices[b].NUMANode
	if na >= 0 && nb >= 0 && na != nb {
		return 10
	}
	return 20
}

// gpuAllocatorPick is go-gpuallocator's best-effort Allocate with nothing
// required (same file): pad the devices to a multiple of k, walk every
// partition into sets of k (iterateGPUPartitions: the first set holds the
// first device, sets with partial padding skipped), keep the first
// partition with the highest summed set score, then return its first
// set of the highest pair-sum score. The walk is exponential: the report
// does not run it beyond 16 devices.
func gpuAllocatorPick(m *topology.Model, k int) ([]int, bool) {
	n := len(m.Devices)
	setScore := func(set []int) int {
		s := 0
		for i, a := range set {
			for _, b := range set[i+1:] {
				if a >= 0 && b >= 0 {
					s += gpuAllocatorScore(m, a, b)
				}
			}
		}
		return s
	}
	if k == 1 {
		// size 1: one callback per device, each scoring 0; the first wins
		return []int{0}, true
	}
	devices := make([]int, n)
	for i := range devices {
		devices[i] = i
	}
	for len(devices)%k != 0 {
		devices = append(devices, -1) // padding
	}
	padding := len(devices) - n
	padOf := func(set []int) int {
		c := 0
		for _, d := range set {
			if d < 0 {
				c++
			}
		}
		return c
	}
	var best [][]int
	bestScore := 0
	var iterate func(devs []int, accum [][]int)
	iterate = func(devs []int, accum [][]int) {
		if len(devs) == k {
			part := append(append([][]int(nil), accum...), devs)
			s := 0
			for _, set := range part {
				s += setScore(set)
			}
			if s > bestScore || best == nil {
				best, bestScore = part, s
			}
			return
		}
		combinations(len(devs)-1, k-1, func(c []int) {
			set := []int{devs[0]}
			for _, i := range c {
				set = append(set, devs[1+i])
			}
			if p := padOf(set); p != 0 && p != padding {
				return
			}
			var rest []int
			for _, d := range devs {
				in := false
				for _, s := range set {
					in = in || s == d
				}
				if !in {
					rest = append(rest, d)
				}
			}
			iterate(rest, append(accum, set))
		})
	}
	iterate(devices, nil)
	// The sets of the best partition, padded ones included as upstream
	// does; should a padded set score best, Allocate would hand out nil
	// devices: no answer.
	pick, pickScore := best[0], setScore(best[0])
	for _, set := range best[1:] {
		if s := setScore(set); s > pickScore {
			pick, pickScore = set, s
		}
	}
	return pick, padOf(pick) == 0
}

// rocmPluginWeight is the ROCm Kubernetes device plugin's
// calculatePairWeight (ROCm/k8s-device-plugin,
// internal/pkg/allocator/device.go at commit
// ed7646843003e8f0b6a0630346f01bb4d1ecff2e), lower is closer: 10 for two
// partitions of one GPU (here: one Package) else 20, plus 10 for an XGMI
// link, 40 for PCIe, 50 for any other link type (NVLink), plus 10 on one
// NUMA node else 20.
func rocmPluginWeight(m *topology.Model, a, b int) int {
	w := 20
	if pa := m.Devices[a].Package; pa != "" && pa == m.Devices[b].Package {
		w = 10
	}
	switch m.Link(a, b).Type {
	case topology.LinkXGMI:
		w += 10
	case topology.LinkPCIe:
		w += 40
	default:
		w += 50
	}
	if m.Devices[a].NUMANode == m.Devices[b].NUMANode {
		return w + 10
	}
	return w + 20
}

// rocmPluginPick is the plugin's best-effort Allocate with every device
// available and none required (internal/pkg/allocator/besteffort_policy.go
// and getCandidateDeviceSubsets in device.go, same commit): devices are
// grouped by GPU (Package), groups sorted by how many devices they offer,
// fewest first (ties by the group's parent id, here its lowest index); a
// group that can hold k gives its first k as a candidate, a smaller one
// is topped up from every other group in that order, breadth first; the
// candidate of least summed pair weight wins, the first on ties. Asking
// for every device returns them all.
func rocmPluginPick(m *topology.Model, k int) ([]int, bool) {
	n := len(m.Devices)
	if k == n {
		all := make([]int, n)
		for i := range all {
			all[i] = i
		}
		return all, true
	}
	type group struct{ ids []int }
	var groups []group
	at := map[string]int{}
	for i, d := range m.Devices {
		key := d.Package
		if key == "" {
			key = fmt.Sprint("device ", i)
		}
		g, ok := at[key]
		if !ok {
			g = len(groups)
			at[key] = g
			groups = append(groups, group{})
		}
		groups[g].ids = append(groups[g].ids, i)
	}
	// stable: equal sizes keep the order of their lowest index
	for i := 1; i < len(groups); i++ {
		for j := i; j > 0 && len(groups[j].ids) < len(groups[j-1].ids); j-- {
			groups[j], groups[j-1] = groups[j-1], groups[j]
		}
	}
	type subset struct {
		ids     []int
		weight  int
		parents []int
	}
	weight := make([]int, n*n) // computed once: the walk below adds pairs millions of times
	for a := 0; a < n; a++ {
		for b := 0; b < n; b++ {
			if a != b {
				weight[a*n+b] = rocmPluginWeight(m, a, b)
			}
		}
	}
	add := func(s subset, id int) subset {
		w := s.weight
		for _, d := range s.ids {
			w += weight[d*n+id]
		}
		return subset{ids: append(append([]int(nil), s.ids...), id), weight: w, parents: s.parents}
	}
	var final, temp []subset
	for gi, g := range groups {
		s := subset{ids: []int{g.ids[0]}, parents: []int{gi}}
		if k == 1 {
			final = append(final, s)
			continue
		}
		full := false
		for i := 1; i < len(g.ids); i++ {
			s = add(s, g.ids[i])
			if i == k-1 {
				full = true
				break
			}
		}
		if full {
			final = append(final, s)
		} else {
			temp = append(temp, s)
		}
	}
	for len(temp) > 0 {
		cur := temp[0]
		temp = temp[1:]
		if len(cur.parents) == len(groups) {
			continue
		}
		for gi := range groups {
			seen := false
			for _, p := range cur.parents {
				seen = seen || p == gi
			}
			if seen {
				continue
			}
			s := subset{ids: cur.ids, weight: cur.weight, parents: append(append([]int(nil), cur.parents...), gi)}
			for _, id := range groups[gi].ids {
				s = add(s, id)
				if len(s.ids) == k {
					final = append(final, s)
					break
				}
			}
			if len(s.ids) < k {
				temp = append(temp, s)
			}
		}
	}
	if len(final) == 0 {
		return nil, false
	}
	best := final[0]
	for _, s := range final[1:] {
		if s.weight < best.weight {
			best = s
		}
	}
	return best.ids, true
}
