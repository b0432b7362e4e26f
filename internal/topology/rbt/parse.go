package rbt

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/amdrun/amdrun/internal/topology"
)

// Matrix kinds a title line can start.
const (
	kindUni    = "uni"
	kindBi     = "bi"
	kindAccess = "access"
	kindOther  = "other" // NUMA distance, average bandwidth: read, not kept
)

// matrixKind classifies a title line: a kind above, or "" (not a title).
func matrixKind(t string) string {
	l := strings.ToLower(t)
	switch {
	case strings.Contains(l, "peak bandwidth") || strings.Contains(l, "copy bandwidth"):
		// "Unidirectional copy peak bandwidth GB/s", 1.x "Unidirectional
		// peak bandwidth GB/s", "Bdirectional" (sic, 1.x-2.0).
		if strings.HasPrefix(l, "uni") {
			return kindUni
		}
		if strings.HasPrefix(l, "bi") || strings.HasPrefix(l, "bd") {
			return kindBi
		}
		return kindOther
	case strings.Contains(l, "average bandwidth"), strings.HasSuffix(l, "numa distance"):
		return kindOther
	case strings.HasSuffix(l, "device access"):
		return kindAccess
	}
	return ""
}

// validLabel says whether s can label a matrix row or column ("4", "cpu0").
func validLabel(s string) bool {
	n, err := strconv.Atoi(strings.TrimPrefix(strings.ToLower(s), "cpu"))
	return err == nil && n >= 0 && n < 1<<20
}

// Parse reads rocm_bandwidth_test output. Matrices name agents by device
// number; with no device list, "cpuN" is a CPU and a number a GPU; the
// TransferBench tables say "CPU 00" and "GPU 00". N/A cells are no figure
// but Printed. A device line with a `GPU-` UUID or a PCI bus is a GPU; a
// 1.x list marks none, so there a GPU is an agent with a figure on the
// unidirectional diagonal. An inconsistent run (check.go) is refused with
// topology.ErrInconsistent at the cell; malformed input gives a
// *topology.ParseError.
func Parse(r io.Reader) (*Result, error) {
	p := &parser{lr: topology.NewLineReader(r, Source), res: &Result{}, byLabel: map[string]int{}}
	if err := p.lr.ForEach(p.line); err != nil {
		return nil, err
	}
	return p.finish()
}

type parser struct {
	lr       *topology.LineReader
	res      *Result
	byLabel  map[string]int // matrix label -> index into res.Agents
	listed   bool           // a "Device:" list was read
	marked   bool           // a listed agent showed it is a GPU (UUID, bus)
	table    *table         // the matrix being read, nil outside one
	sawText  bool
	matrices int
}

type table struct {
	kind  string  // see matrixKind
	title string  // as printed
	tb    bool    // TransferBench layout
	cols  []int   // agent indexes of its columns; nil before the header
	dst   *Matrix // where its cells go; nil for kinds not kept
	rows  map[int]bool
}

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
	if k := matrixKind(t); k != "" {
		return p.startTable(k, t)
	}
	switch {
	case p.table == nil:
		return nil // other text: version, Launch Command, notes, TransferBench settings
	case p.table.cols == nil:
		return p.header(line)
	case p.table.tb:
		return p.tbRow(line)
	}
	fs := topology.SplitFields(line)
	if !validLabel(fs[0].S) {
		p.table = nil // the matrix ended; this is other text
		return nil
	}
	return p.cells(line, fs[0], fs[1:])
}

func (p *parser) startTable(k, title string) error {
	p.table = &table{kind: k, title: title, rows: map[int]bool{}}
	slot := map[string]**Matrix{kindUni: &p.res.Uni, kindBi: &p.res.Bi, kindAccess: &p.res.Access}[k]
	if slot == nil {
		return nil // a kind not kept
	}
	p.matrices++
	if *slot != nil {
		return p.lr.Errorf(0, topology.ErrSyntax, "second %q matrix", title)
	}
	*slot = &Matrix{Title: title, cells: map[[2]int]cell{}}
	p.table.dst = *slot
	return nil
}

// header reads a matrix's column header: "D/D 0 1 ..." or TransferBench's
// "SRC+EXE\DST CPU 00 GPU 00 ...".
func (p *parser) header(line string) error {
	tb := p.table
	fs := topology.SplitFields(line)
	if strings.HasPrefix(fs[0].S, "SRC") && strings.Contains(fs[0].S, `\`) {
		return p.tbHeader(line, fs)
	}
	if fs[0].S != "D/D" {
		return p.lr.Errorf(fs[0].Col, topology.ErrSyntax, "%s: header must start with D/D", tb.title)
	}
	if len(fs) == 1 {
		return p.lr.Errorf(len(line), topology.ErrSyntax, "%s: header names no device", tb.title)
	}
	if len(fs)-1 > MaxAgents {
		return p.lr.Errorf(fs[MaxAgents+1].Col, topology.ErrSyntax, "more than %d devices", MaxAgents)
	}
	for _, f := range fs[1:] {
		if !validLabel(f.S) {
			return p.lr.Errorf(f.Col, topology.ErrSyntax, "%s: unknown device %q", tb.title, f.S)
		}
	}
	return p.setColumns(fs[1:])
}

// tbHeader reads TransferBench's header: pairs "CPU 00", "GPU 07".
func (p *parser) tbHeader(line string, fs []topology.Field) error {
	p.table.tb, p.res.TransferBench = true, true
	rest := fs[1:]
	if len(rest) == 0 || len(rest)%2 != 0 {
		return p.lr.Errorf(len(line), topology.ErrSyntax, "%s: header is not pairs of CPU/GPU and a number", p.table.title)
	}
	if len(rest)/2 > MaxAgents {
		return p.lr.Errorf(rest[2*MaxAgents].Col, topology.ErrSyntax, "more than %d devices", MaxAgents)
	}
	var labels []topology.Field
	for k := 0; k < len(rest); k += 2 {
		label, ok := tbLabel(rest[k].S, rest[k+1].S)
		if !ok {
			return p.lr.Errorf(rest[k].Col, topology.ErrSyntax, "%s: column %q is not CPU nn or GPU nn", p.table.title, rest[k].S+" "+rest[k+1].S)
		}
		labels = append(labels, topology.Field{S: label, Col: rest[k].Col})
	}
	return p.setColumns(labels)
}

// tbLabel joins a TransferBench device name, "GPU" "03" -> "GPU 03".
func tbLabel(kind, num string) (string, bool) {
	if kind != "CPU" && kind != "GPU" {
		return "", false
	}
	n, err := strconv.Atoi(num)
	if err != nil || n < 0 || n >= 1<<20 {
		return "", false
	}
	return kind + " " + num, true
}

func (p *parser) setColumns(labels []topology.Field) error {
	tb := p.table
	tb.cols = []int{}
	for _, f := range labels {
		i, ok := p.agent(f.S)
		if !ok {
			return p.lr.Errorf(f.Col, topology.ErrSyntax, "%s: unknown device %q", tb.title, f.S)
		}
		if slices.Contains(tb.cols, i) {
			return p.lr.Errorf(f.Col, topology.ErrSyntax, "%s: device %q twice", tb.title, f.S)
		}
		tb.cols = append(tb.cols, i)
	}
	return nil
}

// tbRow reads one TransferBench row, "GPU 00  ->  23.83 ...", keeping the
// "->" rows of a unidirectional table and the "<->" rows of a
// bidirectional one; any other line ("Averages") ends the table.
func (p *parser) tbRow(line string) error {
	fs := topology.SplitFields(line)
	if len(fs) < 3 {
		p.table = nil
		return nil
	}
	label, ok := tbLabel(fs[0].S, fs[1].S)
	if !ok {
		p.table = nil
		return nil
	}
	want := "->"
	if p.table.kind == kindBi {
		want = "<->"
	}
	switch fs[2].S {
	case want:
		return p.cells(line, topology.Field{S: label, Col: fs[0].Col}, fs[3:])
	case "->", "<-", "<->", "min", "max", "sd":
		return nil
	}
	return p.lr.Errorf(fs[2].Col, topology.ErrSyntax, "%s: row %s: %q is not ->, <- or <->", p.table.title, label, fs[2].S)
}

func (p *parser) cells(line string, label topology.Field, fs []topology.Field) error {
	tb := p.table
	row, ok := p.agent(label.S)
	if !ok {
		return p.lr.Errorf(label.Col, topology.ErrSyntax, "%s: unknown device %q", tb.title, label.S)
	}
	if tb.rows[row] {
		return p.lr.Errorf(label.Col, topology.ErrSyntax, "%s: row %q twice", tb.title, label.S)
	}
	tb.rows[row] = true
	if len(fs) != len(tb.cols) {
		return p.lr.Errorf(topology.CountCol(line, fs, len(tb.cols)), topology.ErrNotSquare, "%s: row %s has %d cells, want %d", tb.title, label.S, len(fs), len(tb.cols))
	}
	for j, f := range fs {
		c := cell{line: p.lr.Line(), col: f.Col}
		if strings.EqualFold(f.S, "N/A") {
			c.na = true
		} else {
			v, err := strconv.ParseFloat(f.S, 64)
			if err != nil || v < 0 || v > 1e7 || v != v || (tb.kind == kindAccess && v != 0 && v != 1) {
				return p.lr.Errorf(f.Col, topology.ErrBadNumber, "%s: %q", tb.title, f.S)
			}
			c.v = v
		}
		if tb.dst != nil {
			tb.dst.cells[[2]int{row, tb.cols[j]}] = c
		}
	}
	return nil
}

// agent returns the index into res.Agents of the agent label names; with
// no device list a new label adds one ("cpuN" or "CPU nn" a CPU, else a
// GPU). ok is false for a label that names no agent.
func (p *parser) agent(label string) (int, bool) {
	if i, ok := p.byLabel[label]; ok {
		return i, true
	}
	if p.listed || len(p.res.Agents) >= MaxAgents {
		return 0, false
	}
	cpu := strings.HasPrefix(strings.ToLower(label), "cpu")
	p.byLabel[label] = len(p.res.Agents)
	p.res.Agents = append(p.res.Agents, Agent{Label: label, GPU: !cpu})
	return p.byLabel[label], true
}

// device parses the rest of a "Device: N,  name,  GPU-uuid,  bus" line;
// the tool prints a UUID or bus for GPUs only.
func (p *parser) device(rest string) error {
	res := p.res
	parts := strings.Split(rest, ",")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	id, err := strconv.Atoi(parts[0])
	if err != nil || id < 0 || id >= 1<<20 {
		return fmt.Errorf("%w: device number %q", topology.ErrBadNumber, parts[0])
	}
	label := strconv.Itoa(id)
	if _, dup := p.byLabel[label]; dup {
		return fmt.Errorf("%w: device %d listed twice", topology.ErrSyntax, id)
	}
	if len(res.Agents) >= MaxAgents {
		return fmt.Errorf("%w: more than %d devices", topology.ErrSyntax, MaxAgents)
	}
	a := Agent{Label: label}
	if len(parts) > 1 {
		a.Name = parts[1]
	}
	for _, s := range parts[min(2, len(parts)):] {
		if strings.HasPrefix(s, "GPU-") {
			a.GPU = true
		} else if _, ok := parsePCI(s); ok {
			a.PCI, a.GPU = s, true
		}
	}
	a.GPU = a.GPU || len(parts) >= 4
	p.marked = p.marked || a.GPU
	p.byLabel[label] = len(res.Agents)
	res.Agents = append(res.Agents, a)
	return nil
}

func (p *parser) finish() (*Result, error) {
	res := p.res
	switch {
	case !p.sawText:
		return nil, topology.NewParseError(p.lr.Source, 0, 0, topology.ErrEmpty, "")
	case res.Uni == nil && res.Bi == nil && (p.listed || p.matrices > 0):
		return nil, topology.NewParseError(p.lr.Source, 0, 0, topology.ErrTruncated, "no copy bandwidth matrix")
	case res.Uni == nil && res.Bi == nil:
		return nil, topology.NewParseError(p.lr.Source, 0, 0, topology.ErrWrongTool, "no rocm_bandwidth_test device list or matrix")
	}
	if p.listed && !p.marked {
		// 1.x prints only names: a GPU is an agent that copied to itself.
		for i := range res.Agents {
			_, self := res.Uni.At(i, i)
			res.Agents[i].GPU = self
		}
	}
	if len(res.GPUs()) == 0 {
		return nil, topology.NewParseError(p.lr.Source, 0, 0, topology.ErrNoDevices, "")
	}
	if err := res.check(); err != nil {
		return nil, err
	}
	return res, nil
}
