// Package nvidiasmi reads NVIDIA GPU topology from nvidia-smi output: one
// parser per command, which never runs a program; Build makes a finished
// topology.Model of their values, and Discover runs the commands through
// an injected topology.Runner.
package nvidiasmi

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/amdrun/amdrun/internal/topology"
)

// Sources named in the ParseErrors of each parser.
const (
	SourceTopo        = "nvidia-smi topo -m"
	SourceP2P         = "nvidia-smi topo -p2p"
	SourceNVLink      = "nvidia-smi nvlink -s"
	SourceQueryGPU    = "nvidia-smi --query-gpu"
	SourceComputeApps = "nvidia-smi --query-compute-apps"
)

// Topo is what `nvidia-smi topo -m` (or `topo -mp`) says about the GPUs.
type Topo struct {
	// GPUs[i] is row and column GPUi of the matrix.
	GPUs []TopoGPU
	// Cells[i][j] is the cell of row GPUi, column GPUj: "X" when i == j,
	// else "NV<n>", "PIX", "PXB", "PHB", "NODE", "SYS" or "SOC"; ParseTopo
	// guarantees Cells[i][j] == Cells[j][i].
	Cells [][]string
}

// TopoGPU is one GPU row's affinity columns; a cell that is empty, N/A or
// missing gives nil or -1.
type TopoGPU struct {
	CPUAffinity  []int // "CPU Affinity"
	NUMAAffinity int   // the lowest node of "NUMA Affinity" (Grace prints a list, issue 24)
	GPUNUMAID    int   // "GPU NUMA ID": the node of the GPU's own memory (Grace Hopper)
}

// Affinity column names nvidia-smi prints after the device columns.
const (
	colCPU     = "CPU Affinity"
	colNUMA    = "NUMA Affinity"
	colGPUNUMA = "GPU NUMA ID"
)

var (
	ansiSGR  = topology.LazyRegexp("\x1b\\[[0-9;]*m")
	gpuLabel = topology.LazyRegexp(`^GPU(\d+)$`)
	nvCell   = topology.LazyRegexp(`^NV(\d+)$`)
	// devLabels matches header labels run together on 16-NIC nodes
	// ("NIC11NIC12", vllm-project/vllm#31594).
	devLabels = topology.LazyRegexp(`^(?:(?:GPU|NIC)\d+){2,}$`)
	devLabel  = topology.LazyRegexp(`(?:GPU|NIC)\d+`)
)

// cellWords are the device cells of both matrices other than NV#.
var cellWords = []string{"NODE", "SYS", "SOC", "PIX", "PXB", "PHB", "CNS", "GNS", "TNS", "NS", "OK", "U", "X"}

func knownCell(s string) bool {
	_, _, link := linkKind(s)
	return link || s == "X" || p2pStatus[s]
}

// splitMerged splits a run of known device cells ("SYSSYS" in the NIC
// columns of 16-NIC nodes, sgl-project/sglang#8120), each part at its
// offset in s; nil when s is not such a run.
func splitMerged(s string) []topology.Field {
	if knownCell(s) {
		return []topology.Field{{S: s, Col: 0}}
	}
	heads := cellWords // the first cell: an NV# run, else one of the words
	if strings.HasPrefix(s, "NV") {
		nv := s[:len(s)-len(strings.TrimLeft(s[2:], "0123456789"))]
		heads = append([]string{nv}, cellWords...)
	}
	for _, w := range heads {
		if len(w) < len(s) && strings.HasPrefix(s, w) && knownCell(w) {
			if rest := splitMerged(s[len(w):]); rest != nil {
				for i := range rest {
					rest[i].Col += len(w)
				}
				return append([]topology.Field{{S: w, Col: 0}}, rest...)
			}
		}
	}
	return nil
}

var p2pStatus = map[string]bool{"OK": true, "CNS": true, "GNS": true, "TNS": true, "NS": true, "U": true}

// splitAt splits s at sep into trimmed cells with their columns, keeping
// empty ones: they carry meaning.
func splitAt(s string, sep byte) []topology.Field {
	var out []topology.Field
	col := 0
	for _, part := range strings.Split(s, string(sep)) {
		lead := len(part) - len(strings.TrimLeft(part, " \t"))
		out = append(out, topology.Field{S: strings.TrimSpace(part), Col: col + lead})
		col += len(part) + 1
	}
	return out
}

// headerFields splits the header row into column names: the cells between
// tabs, or with tabs expanded, words with the affinity names joined again.
func headerFields(s string) []topology.Field {
	if strings.Contains(s, "\t") {
		return splitLabels(slices.DeleteFunc(splitAt(s, '\t'), func(f topology.Field) bool { return f.S == "" }))
	}
	words := topology.SplitFields(s) // tabs expanded to spaces, as most pasted copies are
	var out []topology.Field
	for i := 0; i < len(words); i++ {
		f := words[i]
		for _, name := range []string{colCPU, colNUMA, colGPUNUMA} {
			n := strings.Count(name, " ") + 1
			if i+n <= len(words) && slices.Equal(strings.Fields(name), topology.Texts(words[i:i+n])) {
				f.S, i = name, i+n-1
				break
			}
		}
		out = append(out, f)
	}
	return splitLabels(out)
}

func splitLabels(fs []topology.Field) []topology.Field {
	var out []topology.Field
	for _, f := range fs {
		if !devLabels().MatchString(f.S) {
			out = append(out, f)
			continue
		}
		for _, loc := range devLabel().FindAllStringIndex(f.S, -1) {
			out = append(out, topology.Field{S: f.S[loc[0]:loc[1]], Col: f.Col + loc[0]})
		}
	}
	return out
}

// matrix is the GPU rows of `topo -m` or `topo -p2p`.
type matrix struct {
	nGPU    int
	tail    []string           // affinity column names, in header order
	cells   [][]topology.Field // cells[i][j]: row GPUi, column GPUj
	tails   [][]topology.Field // tails[i]: row GPUi's affinity cells, one per tail name
	rowLine []int              // line number of each GPU row
}

// readMatrix reads a header, then rows up to a blank line or a Legend.
func readMatrix(r io.Reader, source string) (*matrix, error) {
	mr := &matrixReader{lr: topology.NewLineReader(r, source)}
	for !mr.complete && mr.lr.Next() {
		line := ansiSGR().ReplaceAllString(mr.lr.Text(), "")
		mr.lastLen = len(line)
		if err := mr.line(line); err != nil {
			return nil, err
		}
	}
	if err := mr.lr.Err(); err != nil {
		return nil, err
	}
	return mr.finish()
}

type matrixReader struct {
	lr       *topology.LineReader
	m        *matrix          // nil until the header is read
	cols     []topology.Field // device columns of the header
	gpuCol   []int            // position in cols of GPUk
	lastLen  int              // length of the last line read
	complete bool             // a blank line or Legend ended the matrix
}

func (mr *matrixReader) line(line string) error {
	trimmed := strings.TrimSpace(line)
	switch {
	case mr.m == nil && trimmed == "":
		return nil
	case mr.m == nil:
		return mr.header(line, trimmed)
	case trimmed == "" || strings.HasPrefix(trimmed, "Legend:") || strings.HasPrefix(trimmed, "NIC Legend:"):
		mr.complete = true
		return nil
	}
	return mr.row(line)
}

// header reads the column header: device columns, then affinity columns.
func (mr *matrixReader) header(line, trimmed string) error {
	m := &matrix{}
	for _, f := range headerFields(line) {
		// After the first affinity column every column is one, so that
		// cells after an unknown one line up.
		if len(m.tail) > 0 || f.S == colCPU || f.S == colNUMA || f.S == colGPUNUMA {
			m.tail = append(m.tail, f.S)
		} else {
			mr.cols = append(mr.cols, f)
		}
	}
	for j, c := range mr.cols {
		if !gpuLabel().MatchString(c.S) {
			continue
		}
		if want := fmt.Sprintf("GPU%d", len(mr.gpuCol)); c.S != want {
			return mr.lr.Errorf(c.Col, topology.ErrSyntax, "column %s where %s was expected", c.S, want)
		}
		mr.gpuCol = append(mr.gpuCol, j)
	}
	if len(mr.gpuCol) == 0 {
		return mr.lr.Errorf(0, topology.ErrWrongTool, "first line %q is not a GPU matrix header", clip(trimmed))
	}
	m.nGPU, mr.m = len(mr.gpuCol), m
	return nil
}

func (mr *matrixReader) row(line string) error {
	m := mr.m
	tabbed := strings.Contains(line, "\t")
	fs := topology.SplitFields(line)
	if tabbed {
		fs = splitAt(line, '\t')
	}
	label := fs[0]
	if !gpuLabel().MatchString(label.S) {
		return nil // a NIC row (NICn, mlx5_n, ...): not ours
	}
	k := len(m.cells)
	if k >= m.nGPU {
		return mr.lr.Errorf(label.Col, topology.ErrNotSquare, "row %s but the header has %d GPU columns", label.S, m.nGPU)
	}
	if want := fmt.Sprintf("GPU%d", k); label.S != want {
		return mr.lr.Errorf(label.Col, topology.ErrNotSquare, "row %s where %s was expected", label.S, want)
	}
	body, err := mr.splitDeviceCells(label.S, fs[1:])
	if err != nil {
		return err
	}
	if len(body) < len(mr.cols) {
		return mr.cut(line, "row %s has %d cells, the header has %d columns", label.S, len(body), len(mr.cols))
	}
	rest := body[len(mr.cols):]
	if len(m.tail) > 0 && !slices.ContainsFunc(rest, func(f topology.Field) bool { return f.S != "" }) {
		// Its affinity would be silently unknown (issue 24).
		return mr.cut(line, "row %s ends after its device cells; the header has %s", label.S, strings.Join(m.tail, ", "))
	}
	if !mr.lr.Terminated() {
		// nvidia-smi ends the matrix with a newline and its Legend: this
		// row was cut, maybe inside its last cell ("0-5" of "0-55").
		return mr.cut(line, "the input ends in row %s; its last cell may be cut short", label.S)
	}
	row := make([]topology.Field, m.nGPU)
	for g, j := range mr.gpuCol {
		row[g] = body[j]
	}
	tail, err := alignTail(rest, m.tail, tabbed)
	if err != nil {
		return mr.lr.Errorf(rest[0].Col, topology.ErrSyntax, "row %s: %v", label.S, err)
	}
	m.cells = append(m.cells, row)
	m.tails = append(m.tails, tail)
	m.rowLine = append(m.rowLine, mr.lr.Line())
	return nil
}

// cut is the error of a row with cells missing: ErrTruncated when the
// input ends in it, else ErrNotSquare.
func (mr *matrixReader) cut(line, format string, args ...any) error {
	err := topology.ErrNotSquare
	if !mr.lr.Terminated() {
		err = topology.ErrTruncated
	}
	return mr.lr.Errorf(len(line), err, format, args...)
}

// splitDeviceCells checks the cells under the device columns, splitting
// runs ("SYSSYS") so that a missing separator never shifts later cells
// (issue 24); an unknown cell refuses the row.
func (mr *matrixReader) splitDeviceCells(label string, cells []topology.Field) ([]topology.Field, error) {
	out := make([]topology.Field, 0, len(cells)+2)
	for i, c := range cells {
		if len(out) >= len(mr.cols) {
			return append(out, cells[i:]...), nil
		}
		parts := splitMerged(c.S)
		if parts == nil {
			if i == len(cells)-1 && !mr.lr.Terminated() {
				// The input ends inside this cell ("NV" of "NV18").
				return nil, mr.cut(mr.lr.Text(), "row %s has %d cells, the header has %d columns", label, len(out)+1, len(mr.cols))
			}
			col := mr.cols[len(out)].S
			return nil, mr.lr.Errorf(c.Col, topology.ErrUnknownLinkType, "%s/%s cell %q", label, col, clip(c.S))
		}
		for _, p := range parts {
			out = append(out, topology.Field{S: p.S, Col: c.Col + p.Col})
		}
	}
	return out, nil
}

func (mr *matrixReader) finish() (*matrix, error) {
	m := mr.m
	switch {
	case m == nil:
		return nil, topology.NewParseError(mr.lr.Source, 0, 0, topology.ErrEmpty, "")
	case len(m.cells) < m.nGPU && mr.complete:
		return nil, mr.lr.Errorf(0, topology.ErrNotSquare, "%d GPU rows, the header has %d GPU columns", len(m.cells), m.nGPU)
	case len(m.cells) < m.nGPU:
		return nil, mr.lr.Errorf(mr.lastLen, topology.ErrTruncated, "%d of %d GPU rows", len(m.cells), m.nGPU)
	}
	return m, nil
}

// alignTail matches a row's cells after the device columns to the affinity
// columns names. With tabs, surplus empty cells (one before "GPU NUMA ID")
// go, trailing ones first; with tabs expanded, empty cells are invisible,
// so fewer cells align right (real output misses an empty CPU Affinity).
func alignTail(cells []topology.Field, names []string, tabbed bool) ([]topology.Field, error) {
	n := len(names)
	cells = append([]topology.Field(nil), cells...)
	if tabbed {
		for len(cells) > n && cells[len(cells)-1].S == "" {
			cells = cells[:len(cells)-1]
		}
		for len(cells) > n {
			i := len(cells) - 2
			for i >= 0 && (cells[i].S != "" || cells[i+1].S == "") {
				i--
			}
			if i < 0 {
				break
			}
			cells = slices.Delete(cells, i, i+1)
		}
	}
	if len(cells) > n {
		return nil, fmt.Errorf("%d cells after the device columns, the header has %d", len(cells), n)
	}
	pad := make([]topology.Field, n-len(cells))
	if tabbed {
		return append(cells, pad...), nil
	}
	out := append(pad, cells...)
	// A CPU list shifted into NUMA Affinity would read as nodes (issue 24):
	// with a cell missing, a NUMA cell must be a single node or N/A.
	for k, name := range names {
		if len(cells) < n && name == colNUMA && out[k].S != "" && out[k].S != "N/A" {
			if _, err := strconv.Atoi(out[k].S); err != nil {
				return nil, fmt.Errorf("%d cells for %d affinity columns and %s %q: cannot tell which cell is missing", len(cells), n, colNUMA, clip(out[k].S))
			}
		}
	}
	return out, nil
}

// ParseTopo parses `nvidia-smi topo -m` or `topo -mp`, dropping NIC rows
// and columns, with real or expanded tabs, ANSI SGR escapes, CRLF and
// cells run together ("SYSSYS": split, never shifted); a GPU row without
// its newline was cut and is refused. Errors are *topology.ParseError with
// Source SourceTopo, columns counted without ANSI escapes.
func ParseTopo(r io.Reader) (*Topo, error) {
	m, err := readMatrix(r, SourceTopo)
	if err != nil {
		return nil, err
	}
	t := &Topo{GPUs: make([]TopoGPU, m.nGPU), Cells: make([][]string, m.nGPU)}
	for i := range m.cells {
		if err := m.checkRow(i, SourceTopo, false, t.Cells); err != nil {
			return nil, err
		}
		if t.GPUs[i], err = affinity(m, i); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// P2P is `nvidia-smi topo -p2p <r|w|n|a|p>`: the peer-to-peer status of
// every GPU pair.
type P2P struct {
	// Status[i][j] is the cell of row GPUi, column GPUj: "X" on the
	// diagonal, else "OK", "CNS", "GNS", "TNS", "NS" (chipset, GPU,
	// topology, or just not supported) or "U" (unknown).
	Status [][]string
}

// ParseP2P parses `nvidia-smi topo -p2p r` (or w, n, a, p). Errors are
// *topology.ParseError with Source SourceP2P; topo -m gives ErrWrongTool.
func ParseP2P(r io.Reader) (*P2P, error) {
	m, err := readMatrix(r, SourceP2P)
	if err != nil {
		return nil, err
	}
	p := &P2P{Status: make([][]string, m.nGPU)}
	for i := range m.cells {
		if err := m.checkRow(i, SourceP2P, true, p.Status); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// checkRow sets out[i] to row i's checked cells; a topo -m cell must equal
// its mirror.
func (m *matrix) checkRow(i int, source string, p2p bool, out [][]string) error {
	out[i] = make([]string, m.nGPU)
	for j, c := range m.cells[i] {
		if err := checkCell(c.S, i == j, p2p); err != nil {
			return topology.NewParseError(source, m.rowLine[i], c.Col, err, "GPU%d/GPU%d cell %q", i, j, clip(c.S))
		}
		if !p2p && j < i && c.S != out[j][i] {
			return topology.NewParseError(source, m.rowLine[i], c.Col, topology.ErrSyntax, "GPU%d/GPU%d cell %q differs from GPU%d/GPU%d cell %q", i, j, c.S, j, i, out[j][i])
		}
		out[i][j] = c.S
	}
	return nil
}

// affinity reads row i's affinity cells; see runTogether (issue 34).
func affinity(m *matrix, i int) (TopoGPU, error) {
	line := m.rowLine[i]
	g := TopoGPU{NUMAAffinity: -1, GPUNUMAID: -1}
	for k, name := range m.tail {
		c := m.tails[i][k]
		var err error
		switch {
		case name == colCPU && c.S != "" && c.S != "N/A":
			if g.CPUAffinity, err = topology.ParseCPUList(c.S); err != nil {
				return g, topology.NewParseError(SourceTopo, line, c.Col, topology.ErrSyntax, "GPU%d CPU Affinity: %v", i, err)
			}
		case name == colNUMA:
			g.NUMAAffinity, err = numaList(c.S)
		case name == colGPUNUMA:
			g.GPUNUMAID, err = numaCell(c.S)
		}
		if err != nil { // a NUMA cell
			return g, topology.NewParseError(SourceTopo, line, c.Col, topology.ErrBadNumber, "GPU%d %s %q", i, name, clip(c.S))
		}
	}
	return g, runTogether(m, i)
}

// runTogether refuses row i when its CPU Affinity is a list beside an
// empty NUMA cell: nvidia-smi prints a node or N/A there, so two cells ran
// together ("0-31" and "0" read as "0-310").
func runTogether(m *matrix, i int) error {
	var cpu *topology.Field
	var empty []string
	for k, name := range m.tail {
		c := &m.tails[i][k]
		switch {
		case name == colCPU:
			cpu = c
		case (name == colNUMA || name == colGPUNUMA) && c.S == "":
			empty = append(empty, name)
		}
	}
	if cpu == nil || len(empty) == 0 || cpu.S == "" || cpu.S == "N/A" {
		return nil
	}
	return topology.NewParseError(SourceTopo, m.rowLine[i], cpu.Col, topology.ErrSyntax,
		"GPU%d: CPU Affinity %q beside an empty %s: the cells ran together (nvidia-smi prints a node or N/A there)", i, clip(cpu.S), strings.Join(empty, " and "))
}

// checkCell says whether s is a cell of `topo -p2p` (p2p) or `topo -m`,
// self on the diagonal; the other matrix's cell is the wrong tool.
func checkCell(s string, self, p2p bool) error {
	_, _, link := linkKind(s)
	switch {
	case self && s == "X", !self && (p2p && p2pStatus[s] || !p2p && link):
		return nil
	case self:
		return fmt.Errorf("%w: diagonal cell is not X", topology.ErrSyntax)
	case p2p && link:
		return fmt.Errorf("%w: this is `nvidia-smi topo -m` output, not `topo -p2p`", topology.ErrWrongTool)
	case !p2p && p2pStatus[s]:
		return fmt.Errorf("%w: this is `nvidia-smi topo -p2p` output, not `topo -m`", topology.ErrWrongTool)
	}
	return topology.ErrUnknownLinkType
}

// numaCell reads a NUMA node cell: a node number, or -1 for N/A or empty.
func numaCell(s string) (int, error) {
	if s == "" || s == "N/A" {
		return -1, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > 1<<20 {
		return 0, topology.ErrBadNumber
	}
	return n, nil
}

// maxNUMANode bounds a NUMA node number (Linux allows at most 1024 nodes).
const maxNUMANode = 1 << 12

// numaList reads a NUMA Affinity cell, a node or list: its lowest node,
// or -1 for N/A or "".
func numaList(s string) (int, error) {
	if s == "" || s == "N/A" {
		return -1, nil
	}
	nodes, err := topology.ParseCPUList(s)
	if err != nil || strings.ContainsAny(s, " \t") || len(nodes) == 0 || nodes[len(nodes)-1] > maxNUMANode {
		return 0, topology.ErrBadNumber
	}
	return nodes[0], nil
}

// maxNVLinks bounds the NV# count, far above the 18 of H100 to B200.
const maxNVLinks = 1024

// linkKind classifies a topo -m cell: link type, NVLink count, known.
func linkKind(s string) (topology.LinkType, int, bool) {
	switch s {
	case topology.LevelPIX, topology.LevelPXB, topology.LevelPHB, topology.LevelNODE, topology.LevelSYS, "SOC":
		return topology.LinkPCIe, 0, true
	}
	if mm := nvCell().FindStringSubmatch(s); mm != nil {
		n, err := strconv.Atoi(mm[1])
		if err == nil && n >= 1 && n <= maxNVLinks {
			return topology.LinkNVLink, n, true
		}
	}
	return "", 0, false
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}
