// Package rbt reads the output of rocm_bandwidth_test (rocm-bandwidth-test)
// and applies its measured copy bandwidths to a topology.Model.
//
// Parse is pure and accepts the layouts of tool versions 1.x to 2.6
// (device lines gaining the bus, then the UUID; matrix titles renamed),
// the TransferBench p2p tables of rocm-bandwidth-test 7.x (`CPU 00`,
// `GPU 03`, rows marked `->`, `<-`, `<->`) and redacted excerpts without a
// device list, indented or not; testdata/public holds one capture of each.
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
	ID    int    // "Device: 4"; -1 without a device list
	Label string // how matrices name the agent ("4", "cpu0")
	GPU   bool
	Name  string // as printed
	UUID  string // "GPU-ab43b63dec8adaf3", "" for CPUs
	PCI   string // "c9:0.0", "" if none
	// Ordinal is the agent's position among agents of its kind: the
	// NUMA node for a CPU, the GPU order for a GPU.
	Ordinal int
}

// Matrix is one matrix of the run: copy bandwidths in GB/s, or the 0/1
// cells of the access matrix. Rows are copy sources, columns
// destinations.
type Matrix struct {
	Title string          // as printed
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
	Version string  // the RocmBandwidthTest version line's value
	Agents  []Agent // in the tool's order (else the matrices')
	// Uni and Bi are the unidirectional and bidirectional (both directions
	// at once, summed) copy peak bandwidth matrices, nil when not printed.
	Uni, Bi *Matrix
	// Access is the access matrix: 1 where the row agent can reach the
	// column agent's memory (peer to peer), 0 where it cannot.
	Access *Matrix
	// TransferBench says the run is TransferBench's p2p tables.
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
