package selector

import (
	"slices"

	"github.com/amdrun/amdrun/internal/topology"
)

// Measured bandwidths are compared in levels, not as measured. A copy
// benchmark repeated on the same link varies by a few percent (amdrun
// bench, rocm_bandwidth_test), so on a partitioned node every measured
// pair differs a little: the partitions of one GPU would no longer be
// interchangeable, the search would lose its classes and ties would be
// decided by noise. Levels are built from every measured link of the
// model, in ascending order: a value within levelStep of the previous
// one joins its level as long as the level spans at most levelSpan from
// its lowest value; every value of a level counts as the level's median.
// So links that differ by less than 2.5% between neighbours (a ±3% noise
// band of 6% is one level) rank the same, and two real speeds more than
// 10% apart never merge. Theoretical (table) bandwidths are exact and
// left alone.
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
