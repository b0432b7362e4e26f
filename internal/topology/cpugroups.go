package topology

import "slices"

// CPUGroups are the host's CPUs grouped beyond NUMA nodes: sockets and
// level-3 caches (one CCD of an AMD EPYC), for binding.
type CPUGroups struct {
	// Sockets are the online CPUs of each package, by package id.
	Sockets [][]int `json:"sockets"`
	// L3 are the online CPUs sharing each level-3 cache, by first CPU; a
	// cache spanning NUMA nodes is listed once per node.
	L3 [][]int `json:"l3"`
	// SocketsGap and L3Gap say in one line what the host did not tell when
	// Sockets or L3 leave CPUs out ("" when they hold them all).
	SocketsGap string `json:"-"`
	L3Gap      string `json:"-"`
}

// SocketOf returns the index in Sockets of the socket holding CPU c, or -1.
func (g *CPUGroups) SocketOf(c int) int {
	return slices.IndexFunc(g.Sockets, func(s []int) bool { return slices.Contains(s, c) })
}
