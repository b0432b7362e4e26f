package topology

import "slices"

// CPUGroups are the host's CPUs grouped beyond NUMA nodes, for binding a
// rank to its device's socket or to one core complex (the CPUs that
// share a last-level cache: one CCD of an AMD EPYC).
type CPUGroups struct {
	// Sockets are the online CPUs of each physical package, ascending,
	// in package id order.
	Sockets [][]int `json:"sockets"`
	// L3 are the online CPUs sharing each level-3 cache, ascending, in
	// order of their first CPU. A cache that spans NUMA nodes (Intel's
	// sub-NUMA clustering) is listed once per node, with that node's
	// CPUs.
	L3 [][]int `json:"l3"`
	// SocketsGap and L3Gap say, in one line, what the host did not tell
	// when Sockets or L3 leave some of the CPUs read out ("" when they
	// hold them all): a binding that needs the groups falls back.
	SocketsGap string `json:"-"`
	L3Gap      string `json:"-"`
}

// SocketOf returns the index in Sockets of the socket holding CPU c, or
// -1.
func (g *CPUGroups) SocketOf(c int) int {
	return slices.IndexFunc(g.Sockets, func(s []int) bool { return slices.Contains(s, c) })
}
