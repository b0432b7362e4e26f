// Package rbt reads the output of rocm_bandwidth_test (rocm-bandwidth-test)
// and applies its measured copy bandwidths to a topology.Model.
//
// Parse is pure and accepts the layouts seen across tool versions: the
// 10-space indentation of v2.3+ or none, blank lines between matrix rows,
// progress-dot lines, `Launch Command is:` and version lines, the v2.0.1
// titles (`Device Access`, `Bdirectional`) and the v2.3+ ones
// (`Inter-Device Access`, `Bidirectional`), and redacted excerpts whose
// matrices have rows labelled `cpu0`, `0`.. and no device list.
package rbt

import (
	"fmt"
	"io"
	"strconv"
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

// Matrix is one bandwidth matrix in GB/s. Rows are copy sources, columns
// destinations.
type Matrix struct {
	// Title as printed.
	Title string
	cells map[[2]int]float64 // (row agent, column agent) -> GB/s
}

// At returns the figure from agent index from to agent index to (indexes
// into Result.Agents); ok is false for N/A or a cell not printed.
func (m *Matrix) At(from, to int) (gbs float64, ok bool) {
	if m == nil {
		return 0, false
	}
	v, ok := m.cells[[2]int{from, to}]
	return v, ok
}

// Result is a parsed rocm_bandwidth_test run.
type Result struct {
	// Version is the RocmBandwidthTest version line's value, "" if absent.
	Version string
	// Agents in the tool's order (or, without a device list, in the order
	// matrices name them).
	Agents []Agent
	// Uni and Bi are the unidirectional and bidirectional copy peak
	// bandwidth matrices; nil when the run did not print them.
	Uni, Bi *Matrix
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

// HostFigure is the measured copy bandwidth between one CPU agent (a
// NUMA node) and one GPU, in GB/s; 0 means not measured.
type HostFigure struct {
	// CPU is the CPU agent's ordinal (its NUMA node), GPU the GPU's
	// ordinal among GPU agents.
	CPU, GPU int
	// HostToDevice and DeviceToHost are unidirectional figures.
	HostToDevice, DeviceToHost float64
	// Bidirectional is the bidirectional figure.
	Bidirectional float64
}

// Host returns the host-device figures for every CPU-GPU pair that has
// at least one, ordered by CPU and then GPU.
func (r *Result) Host() []HostFigure {
	var out []HostFigure
	for c, ca := range r.Agents {
		if ca.GPU {
			continue
		}
		for g, ga := range r.Agents {
			if !ga.GPU {
				continue
			}
			f := HostFigure{CPU: ca.Ordinal, GPU: ga.Ordinal}
			f.HostToDevice, _ = r.Uni.At(c, g)
			f.DeviceToHost, _ = r.Uni.At(g, c)
			if v, ok := r.Bi.At(c, g); ok {
				f.Bidirectional = v
			} else if v, ok := r.Bi.At(g, c); ok {
				f.Bidirectional = v
			}
			if f.HostToDevice > 0 || f.DeviceToHost > 0 || f.Bidirectional > 0 {
				out = append(out, f)
			}
		}
	}
	return out
}

// matrixKind classifies a title line: "uni", "bi", "other" (access,
// distance) or "" (not a title).
func matrixKind(t string) string {
	l := strings.ToLower(t)
	switch {
	case strings.Contains(l, "copy peak bandwidth") || strings.Contains(l, "copy bandwidth"):
		if strings.HasPrefix(l, "uni") {
			return "uni"
		}
		if strings.HasPrefix(l, "bi") || strings.HasPrefix(l, "bd") {
			return "bi"
		}
		return "other"
	case strings.HasSuffix(l, "device access") || strings.HasSuffix(l, "numa distance"):
		return "other"
	}
	return ""
}

// validLabel says whether s can label a matrix row or column.
func validLabel(s string) bool {
	if s == "" {
		return false
	}
	if rest, ok := strings.CutPrefix(strings.ToLower(s), "cpu"); ok {
		s = rest
	}
	n, err := strconv.Atoi(s)
	return err == nil && n >= 0 && n < 1<<20
}

// Parse reads rocm_bandwidth_test output. Matrices name agents by device
// number; with no device list, labels "cpuN" are CPUs and plain numbers
// are GPUs. N/A cells are left out. Malformed input gives a
// *topology.ParseError wrapping ErrSyntax (bad device line, unknown or
// repeated label), ErrNotSquare (a row with the wrong number of cells),
// ErrBadNumber, ErrTruncated (a device list but no bandwidth matrix),
// ErrWrongTool (neither) or ErrNoDevices (empty input).
func Parse(r io.Reader) (*Result, error) {
	p := &parser{lr: topology.NewLineReader(r, Source), res: &Result{}, byLabel: map[string]int{}}
	if err := p.lr.ForEach(p.line); err != nil {
		return nil, err
	}
	return p.finish()
}

// parser holds what Parse has read so far.
type parser struct {
	lr       *topology.LineReader
	res      *Result
	byLabel  map[string]int // matrix label -> index into res.Agents
	listed   bool           // a "Device:" list was read
	table    *table         // the matrix being read, nil outside one
	sawText  bool
	matrices int
}

// table is the matrix Parse is in.
type table struct {
	kind  string  // see matrixKind
	title string  // as printed
	cols  []int   // agent indexes of its columns; nil before the header
	dst   *Matrix // where its cells go; nil for access and distance
	rows  map[int]bool
}

// line reads one line of input.
func (p *parser) line(line string) error {
	t := strings.TrimSpace(line)
	if t == "" {
		return nil
	}
	p.sawText = true
	if strings.Trim(t, ".") == "" {
		return nil // progress dots
	}
	if rest, ok := strings.CutPrefix(t, "Device:"); ok {
		if err := p.device(rest); err != nil {
			return p.lr.Errorf(len(line)-len(strings.TrimLeft(line, " \t")), err, "")
		}
		p.listed, p.table = true, nil
		return nil
	}
	if v, ok := strings.CutPrefix(t, "RocmBandwidthTest Version:"); ok {
		p.res.Version = strings.TrimSpace(v)
		return nil
	}
	if k := matrixKind(t); k != "" {
		return p.startTable(k, t)
	}
	switch {
	case p.table == nil:
		return nil // other text: Launch Command, notes
	case p.table.cols == nil:
		return p.header(line)
	}
	return p.row(line)
}

// startTable begins a matrix of kind k titled title.
func (p *parser) startTable(k, title string) error {
	p.table = &table{kind: k, title: title, rows: map[int]bool{}}
	p.matrices++
	var slot **Matrix
	switch k {
	case "uni":
		slot = &p.res.Uni
	case "bi":
		slot = &p.res.Bi
	default:
		return nil
	}
	if *slot != nil {
		return p.lr.Errorf(0, topology.ErrSyntax, "second %q matrix", title)
	}
	*slot = &Matrix{Title: title, cells: map[[2]int]float64{}}
	p.table.dst = *slot
	return nil
}

// header reads a matrix's "D/D 0 1 ..." line.
func (p *parser) header(line string) error {
	tb := p.table
	fs := topology.SplitFields(line)
	if fs[0].S != "D/D" {
		return p.lr.Errorf(fs[0].Col, topology.ErrSyntax, "%s: header must start with D/D", tb.title)
	}
	if len(fs) == 1 {
		return p.lr.Errorf(len(line), topology.ErrSyntax, "%s: header names no device", tb.title)
	}
	if len(fs)-1 > MaxAgents {
		return p.lr.Errorf(fs[MaxAgents+1].Col, topology.ErrSyntax, "more than %d devices", MaxAgents)
	}
	seen := map[int]bool{}
	tb.cols = []int{}
	for _, f := range fs[1:] {
		i, ok := p.agent(f.S)
		if !ok {
			return p.lr.Errorf(f.Col, topology.ErrSyntax, "%s: unknown device %q", tb.title, f.S)
		}
		if seen[i] {
			return p.lr.Errorf(f.Col, topology.ErrSyntax, "%s: device %q twice", tb.title, f.S)
		}
		seen[i] = true
		tb.cols = append(tb.cols, i)
	}
	return nil
}

// row reads one matrix row; a line that is not one ends the matrix.
func (p *parser) row(line string) error {
	tb := p.table
	fs := topology.SplitFields(line)
	if !validLabel(fs[0].S) {
		p.table = nil // the matrix ended; this is other text
		return nil
	}
	row, ok := p.agent(fs[0].S)
	if !ok {
		return p.lr.Errorf(fs[0].Col, topology.ErrSyntax, "%s: unknown device %q", tb.title, fs[0].S)
	}
	if tb.rows[row] {
		return p.lr.Errorf(fs[0].Col, topology.ErrSyntax, "%s: row %q twice", tb.title, fs[0].S)
	}
	tb.rows[row] = true
	if len(fs)-1 != len(tb.cols) {
		col := len(line)
		if len(fs)-1 > len(tb.cols) {
			col = fs[len(tb.cols)+1].Col
		}
		return p.lr.Errorf(col, topology.ErrNotSquare, "%s: row %s has %d cells, want %d", tb.title, fs[0].S, len(fs)-1, len(tb.cols))
	}
	for j, f := range fs[1:] {
		if strings.EqualFold(f.S, "N/A") {
			continue
		}
		v, err := strconv.ParseFloat(f.S, 64)
		if err != nil || v < 0 || v > 1e7 || v != v {
			return p.lr.Errorf(f.Col, topology.ErrBadNumber, "%s: %q", tb.title, f.S)
		}
		if tb.dst != nil {
			tb.dst.cells[[2]int{row, tb.cols[j]}] = v
		}
	}
	return nil
}

// agent returns the index into res.Agents of the agent a matrix labels
// label. Without a device list, a new label adds an agent: "cpuN" a CPU,
// a number a GPU. ok is false for a label that names no agent.
func (p *parser) agent(label string) (int, bool) {
	if !validLabel(label) {
		return 0, false
	}
	if i, ok := p.byLabel[label]; ok {
		return i, true
	}
	if p.listed || len(p.res.Agents) >= MaxAgents {
		return 0, false
	}
	a := Agent{ID: -1, Label: label}
	if rest, ok := strings.CutPrefix(strings.ToLower(label), "cpu"); ok {
		a.Ordinal, _ = strconv.Atoi(rest)
	} else {
		a.GPU = true
		a.Ordinal, _ = strconv.Atoi(label)
	}
	p.byLabel[label] = len(p.res.Agents)
	p.res.Agents = append(p.res.Agents, a)
	return p.byLabel[label], true
}

// finish checks what the whole input gave.
func (p *parser) finish() (*Result, error) {
	res := p.res
	switch {
	case !p.sawText:
		return nil, p.lr.ErrorAt(0, 0, topology.ErrNoDevices, "")
	case res.Uni == nil && res.Bi == nil && (p.listed || p.matrices > 0):
		return nil, p.lr.ErrorAt(0, 0, topology.ErrTruncated, "no copy bandwidth matrix")
	case res.Uni == nil && res.Bi == nil:
		return nil, p.lr.ErrorAt(0, 0, topology.ErrWrongTool, "no rocm_bandwidth_test device list or matrix")
	}
	if len(res.GPUs()) == 0 {
		return nil, p.lr.ErrorAt(0, 0, topology.ErrNoDevices, "")
	}
	return res, nil
}

// device parses the rest of a "Device: N,  name,  GPU-uuid,  bus" line.
func (p *parser) device(rest string) error {
	res, byLabel := p.res, p.byLabel
	parts := strings.Split(rest, ",")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	id, err := strconv.Atoi(parts[0])
	if err != nil || id < 0 || id >= 1<<20 {
		return fmt.Errorf("%w: device number %q", topology.ErrBadNumber, parts[0])
	}
	label := strconv.Itoa(id)
	if _, dup := byLabel[label]; dup {
		return fmt.Errorf("%w: device %d listed twice", topology.ErrSyntax, id)
	}
	if len(res.Agents) >= MaxAgents {
		return fmt.Errorf("%w: more than %d devices", topology.ErrSyntax, MaxAgents)
	}
	a := Agent{ID: id, Label: label}
	if len(parts) > 1 {
		a.Name = parts[1]
	}
	for _, p := range parts[min(2, len(parts)):] {
		switch {
		case strings.HasPrefix(p, "GPU-"):
			a.UUID, a.GPU = p, true
		case isPCI(p):
			a.PCI = p
		}
	}
	if len(parts) >= 4 {
		a.GPU = true
	}
	for _, b := range res.Agents {
		if b.GPU == a.GPU {
			a.Ordinal++
		}
	}
	byLabel[label] = len(res.Agents)
	res.Agents = append(res.Agents, a)
	return nil
}

// isPCI reports whether s looks like "c9:0.0" or "0000:c9:00.0".
func isPCI(s string) bool {
	_, ok := parsePCI(s)
	return ok
}

// parsePCI returns bus, device and function of "bb:d.f" or "dddd:bb:dd.f".
func parsePCI(s string) ([3]uint64, bool) {
	parts := strings.Split(s, ":")
	if len(parts) == 3 {
		parts = parts[1:]
	}
	if len(parts) != 2 {
		return [3]uint64{}, false
	}
	dev, fn, ok := strings.Cut(parts[1], ".")
	if !ok {
		return [3]uint64{}, false
	}
	var out [3]uint64
	for i, p := range []string{parts[0], dev, fn} {
		if p == "" || len(p) > 4 {
			return [3]uint64{}, false
		}
		v, err := strconv.ParseUint(p, 16, 16)
		if err != nil {
			return [3]uint64{}, false
		}
		out[i] = v
	}
	return out, true
}
