// Package rbt reads rocm_bandwidth_test output and applies its measured
// copy bandwidths to a topology.Model. Parse accepts tool versions 1.x to
// 2.6, the TransferBench p2p tables of 7.x and redacted excerpts without
// a device list; testdata/public holds one capture of each.
package rbt

import (
	"strings"

	"github.com/amdrun/amdrun/internal/topology"
)

// Source is the ParseError source of this package.
const Source = "rocm_bandwidth_test"

// MaxAgents bounds the device list and matrices; more is malformed.
const MaxAgents = 512

// Agent is one device rocm_bandwidth_test lists: a CPU or a GPU.
type Agent struct {
	Label string // how matrices name the agent ("4", "cpu0")
	GPU   bool
	Name  string // as printed
	PCI   string // "c9:0.0", "" if none
}

// Matrix is one matrix of the run: copy bandwidths in GB/s, or the 0/1
// access cells; rows are copy sources.
type Matrix struct {
	Title string          // as printed
	cells map[[2]int]cell // (row agent, column agent) -> cell as printed
}

type cell struct {
	v         float64
	na        bool // printed N/A
	line, col int
}

// At returns the figure from agent from to agent to (Result.Agents
// indexes); ok is false for N/A or a cell not printed.
func (m *Matrix) At(from, to int) (gbs float64, ok bool) {
	if m == nil {
		return 0, false
	}
	c, ok := m.cells[[2]int{from, to}]
	return c.v, ok && !c.na
}

// Printed says whether the matrix printed a cell (figure or N/A) there.
func (m *Matrix) Printed(from, to int) bool {
	if m == nil {
		return false
	}
	_, ok := m.cells[[2]int{from, to}]
	return ok
}

// Result is a parsed rocm_bandwidth_test run.
type Result struct {
	Agents []Agent // in the tool's order (else the matrices')
	// Uni and Bi are the unidirectional and bidirectional (summed) copy
	// bandwidth matrices, nil when not printed.
	Uni, Bi       *Matrix
	Access        *Matrix // 1 where the row agent can reach the column agent's memory
	TransferBench bool    // the run is TransferBench's p2p tables
	// Here says amdrun ran the tool on the model's node (amdrun bench), so
	// matching GPUs in HIP's order needs no warning; Parse leaves it false.
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

// parsePCI returns "bb:dd.f" of "bb:d.f" or "dddd:bb:dd.f".
func parsePCI(s string) (string, bool) {
	n, ok := topology.NormalizePCI(s)
	_, bdf, _ := strings.Cut(n, ":")
	return bdf, ok
}
