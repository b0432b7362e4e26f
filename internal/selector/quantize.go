package selector

import (
	"slices"

	"github.com/amdrun/amdrun/internal/topology"
)

// Measured bandwidths are compared in levels (docs/placement.md): a copy
// benchmark varies by a few percent run to run, which would break the
// classes of a partitioned GPU and decide ties by noise. Sorted, a value
// within levelStep of the previous joins its level while the level spans
// at most levelSpan, and counts as the level's median.
const (
	levelStep = 0.025
	levelSpan = 0.10
)

// measuredLevels maps every measured link bandwidth of m to its level's
// value; nil when m has no measured link.
func measuredLevels(m *topology.Model) map[int64]int64 {
	var vals []int64
	for i := range m.Links {
		if l := &m.Links[i]; l.Measured {
			vals = append(vals, l.MaxBandwidth)
		}
	}
	if len(vals) == 0 {
		return nil
	}
	slices.Sort(vals)
	level := make(map[int64]int64, len(vals))
	start := 0
	for i := 1; i <= len(vals); i++ {
		if i < len(vals) && float64(vals[i]) <= float64(vals[i-1])*(1+levelStep) &&
			float64(vals[i]) <= float64(vals[start])*(1+levelSpan) {
			continue
		}
		median := vals[start+(i-1-start)/2]
		for _, v := range vals[start:i] {
			level[v] = median
		}
		start = i
	}
	return level
}
