// Package rbt reads the output of rocm_bandwidth_test (rocm-bandwidth-test)
// and applies its measured copy bandwidths to a topology.Model.
//
// Parse is pure and accepts the layouts seen across tool versions:
//
//   - 1.x (2017-2018): `Device: N,  name` for every agent, titles
//     `Device Access`, `Unidirectional peak bandwidth GB/s` and
//     `Bdirectional peak bandwidth GB/s` (sic);
//   - 2.0-2.5.0 (2019-2021): GPU lines gain the bus, `Device: 1,  Vega 10
//     [Radeon PRO WX 8100],  0d:0.0`, titles `... copy peak bandwidth`;
//   - 2.5.1 and later (2021-2025): GPU lines also carry the UUID
//     (`GPU-...`), titles `Inter-Device Access`, `Bidirectional`, a
//     `Launch Command is:` line;
//   - the TransferBench p2p tables that rocm-bandwidth-test 7.x prints
//     for `rocm_bandwidth_test plugin --run tb p2p` (and TransferBench
//     itself for `TransferBench p2p`): rows and columns named `CPU 00`,
//     `GPU 03`, rows marked `->`, `<-` and `<->`;
//   - redacted excerpts whose matrices have rows labelled `cpu0`, `0`..
//     and no device list;
//
// with the 10-space indentation or none, blank lines between rows and
// progress-dot lines. It also checks that a run is consistent (see
// Parse).
package rbt

import (
	"strings"

	"github.com/amdrun/amdrun/internal/topology"
)

// Source is the ParseError source of this package.
const Source = "rocm_bandwidth_test"

// MaxAgents bounds the device list and matrices; larger inputs are
// refused as malformed.
const MaxAgents = 512

// Agent is one device rocm_bandwidth_test lists: a CPU (one per NUMA
// node) or a GPU.
type Agent struct {
	// ID is the tool's device number ("Device: 4"), -1 when the input
	// has no device list (redacted excerpts).
	ID int
	// Label is how matrices name the agent ("4", "cpu0").
	Label string
	// GPU is true for a GPU agent.
	GPU bool
	// Name as printed (may be empty for GPUs).
	Name string
	// UUID as printed ("GPU-ab43b63dec8adaf3"), "" for CPUs.
	UUID string
	// PCI is the printed bus address ("c9:0.0"), "" if none.
	PCI string
	// Ordinal is the agent's position among agents of its kind: the
	// NUMA node for a CPU, the GPU order for a GPU.
	Ordinal int
}

// Matrix is one matrix of the run: copy bandwidths in GB/s, or the 0/1
// cells of the access matrix. Rows are copy sources, columns
// destinations.
type Matrix struct {
	// Title as printed.
	Title string
	cells map[[2]int]cell // (row agent, column agent) -> cell as printed
}

// cell is one printed matrix cell and where it was.
type cell struct {
	v         float64
	na        bool // printed N/A
	line, col int
}

// At returns the figure from agent index from to agent index to (indexes
// into Result.Agents); ok is false for N/A or a cell not printed.
func (m *Matrix) At(from, to int) (gbs float64, ok bool) {
	if m == nil {
		return 0, false
	}
	c, ok := m.cells[[2]int{from, to}]
	return c.v, ok && !c.na
}

// Printed says whether the matrix has a cell, a figure or N/A, from
// agent index from to agent index to.
func (m *Matrix) Printed(from, to int) bool {
	if m == nil {
		return false
	}
	_, ok := m.cells[[2]int{from, to}]
	return ok
}

// Result is a parsed rocm_bandwidth_test run.
type Result struct {
	// Version is the RocmBandwidthTest version line's value, "" if absent.
	Version string
	// Agents in the tool's order (or, without a device list, in the order
	// matrices name them).
	Agents []Agent
	// Uni and Bi are the unidirectional and bidirectional copy peak
	// bandwidth matrices; nil when the run did not print them. Bi holds,
	// per pair, the sum of both directions copying at once.
	Uni, Bi *Matrix
	// Access is the `Device Access` / `Inter-Device Access` matrix: 1
	// where the row agent can reach the column agent's memory, 0 where it
	// cannot (two GPUs without peer-to-peer access); nil when not printed.
	Access *Matrix
	// TransferBench says the run is TransferBench's p2p tables
	// (rocm-bandwidth-test 7.x), which also copy between CPUs.
	TransferBench bool
	// Here says amdrun ran the tool itself on the node the model was
	// discovered on (amdrun bench), so matching its GPUs in HIP's order
	// is no guess worth a warning. Parse leaves it false.
	Here bool
}

// GPUs returns the indexes (into Agents) of the GPU agents, in order.
func (r *Result) GPUs() []int {
	var out []int
	for i, a := range r.Agents {
		if a.GPU {
			out = append(out, i)
		}
	}
	return out
}

// isPCI reports whether s looks like "c9:0.0" or "0000:c9:00.0".
func isPCI(s string) bool {
	_, ok := parsePCI(s)
	return ok
}

// parsePCI returns "bb:dd.f" of "bb:d.f" or "dddd:bb:dd.f" (the domain
// left out: the tool prints none).
func parsePCI(s string) (string, bool) {
	n, ok := topology.NormalizePCI(s)
	_, bdf, _ := strings.Cut(n, ":")
	return bdf, ok
}
