// Package nvidiasmi reads NVIDIA GPU topology from nvidia-smi output.
//
// The parsers (ParseTopo, ParseP2P, ParseNVLinkStatus, ParseQueryGPU,
// ParseComputeApps) take the text of one nvidia-smi command each and never
// run a program; Build turns their values into a finished topology.Model,
// and Discover runs the commands through an injected topology.Runner.
package nvidiasmi

import (
	"fmt"
	"io"
	"regexp"
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
// NIC rows and columns are dropped.
type Topo struct {
	// GPUs[i] is row and column GPUi of the matrix.
	GPUs []TopoGPU
	// Cells[i][j] is the cell of row GPUi, column GPUj as printed and
	// trimmed: "X" when i == j, else "NV<n>", "PIX", "PXB", "PHB", "NODE",
	// "SYS" or "SOC" (the pre-2017 name of SYS). ParseTopo guarantees a
	// known value and Cells[i][j] == Cells[j][i].
	Cells [][]string
}

// TopoGPU is one GPU row's affinity columns.
type TopoGPU struct {
	// CPUAffinity is the "CPU Affinity" cell as a CPU list; nil when the
	// cell is empty, N/A or the column is missing.
	CPUAffinity []int
	// NUMAAffinity is the "NUMA Affinity" cell; -1 when N/A, empty or the
	// column is missing (drivers before ~r450 print only CPU Affinity).
	NUMAAffinity int
	// GPUNUMAID is the "GPU NUMA ID" cell (the NUMA node of the GPU's own
	// memory on coherent systems such as Grace Hopper); -1 when N/A,
	// empty or missing.
	GPUNUMAID int
}

// Affinity column names nvidia-smi prints after the device columns.
const (
	colCPU     = "CPU Affinity"
	colNUMA    = "NUMA Affinity"
	colGPUNUMA = "GPU NUMA ID"
)

var (
	ansiSGR  = regexp.MustCompile("\x1b\\[[0-9;]*m")
	gpuLabel = regexp.MustCompile(`^GPU(\d+)$`)
	nvCell   = regexp.MustCompile(`^NV(\d+)$`)
)

// p2pStatus holds the cells of `nvidia-smi topo -p2p` (see ParseP2P).
var p2pStatus = map[string]bool{"OK": true, "CNS": true, "GNS": true, "TNS": true, "NS": true, "U": true}

// field is one cell of a line and the 0-based byte column it starts at.
type field struct {
	text string
	col  int
}

// tabFields splits a line at tabs, trimming spaces around each cell (the
// self cell is " X "). Empty cells are kept: they carry meaning.
func tabFields(s string) []field {
	var out []field
	start := 0
	for i := 0; i <= len(s); i++ {
		if i < len(s) && s[i] != '\t' {
			continue
		}
		part := s[start:i]
		lead := len(part) - len(strings.TrimLeft(part, " "))
		out = append(out, field{strings.TrimSpace(part), start + lead})
		start = i + 1
	}
	return out
}

// spaceFields splits a line whose tabs were expanded to spaces (as most
// pasted copies are) at runs of blanks.
func spaceFields(s string) []field {
	var out []field
	for i := 0; i < len(s); {
		if s[i] == ' ' || s[i] == '\t' || s[i] == '\r' {
			i++
			continue
		}
		j := i
		for j < len(s) && s[j] != ' ' && s[j] != '\t' && s[j] != '\r' {
			j++
		}
		out = append(out, field{s[i:j], i})
		i = j
	}
	return out
}

// headerFields splits the header row into column names. With tabs the
// names are the tab-separated cells; with expanded tabs the words of the
// known affinity columns are joined again.
func headerFields(s string) []field {
	if strings.Contains(s, "\t") {
		var out []field
		for _, f := range tabFields(s) {
			if f.text != "" {
				out = append(out, f)
			}
		}
		return out
	}
	words := spaceFields(s)
	var out []field
	for i := 0; i < len(words); i++ {
		joined := false
		for _, name := range []string{colCPU, colNUMA, colGPUNUMA} {
			parts := strings.Fields(name)
			if i+len(parts) > len(words) {
				continue
			}
			ok := true
			for k, p := range parts {
				if words[i+k].text != p {
					ok = false
					break
				}
			}
			if ok {
				out = append(out, field{name, words[i].col})
				i += len(parts) - 1
				joined = true
				break
			}
		}
		if !joined {
			out = append(out, words[i])
		}
	}
	return out
}

func isAffinityColumn(name string) bool {
	return name == colCPU || name == colNUMA || name == colGPUNUMA
}

// matrix is the device matrix shared by `topo -m` and `topo -p2p`: the
// GPU rows only, with their matrix cells and affinity cells.
type matrix struct {
	nGPU    int
	tail    []string  // affinity column names, in header order
	cells   [][]field // cells[i][j]: row GPUi, column GPUj
	tails   [][]field // tails[i]: row GPUi's affinity cells, one per tail name
	rowLine []int     // line number of each GPU row
}

// readMatrix reads a header row, then rows up to a blank line, a Legend
// block or the end of input. source names the ParseErrors.
func readMatrix(r io.Reader, source string) (*matrix, error) {
	mr := &matrixReader{lr: topology.NewLineReader(r, source)}
	for mr.lr.Next() {
		line := ansiSGR.ReplaceAllString(mr.lr.Text(), "")
		mr.lastLen = len(line)
		done, err := mr.line(line)
		if err != nil {
			return nil, err
		}
		if done {
			break
		}
	}
	if err := mr.lr.Err(); err != nil {
		return nil, err
	}
	return mr.finish()
}

// matrixReader holds what readMatrix has read so far.
type matrixReader struct {
	lr       *topology.LineReader
	m        *matrix // nil until the header is read
	cols     []field // device columns of the header
	gpuCol   []int   // position in cols of GPUk
	lastLen  int     // length of the last line read
	complete bool    // a blank line or Legend ended the matrix
}

// errorf makes the ParseError of the current line.
func (mr *matrixReader) errorf(col int, sentinel error, format string, args ...any) error {
	return mr.lr.Errorf(col, sentinel, format, args...)
}

// line reads one line (ANSI escapes removed); done says the matrix ended.
func (mr *matrixReader) line(line string) (done bool, err error) {
	trimmed := strings.TrimSpace(line)
	if mr.m == nil {
		if trimmed == "" {
			return false, nil
		}
		return false, mr.header(line, trimmed)
	}
	if trimmed == "" || strings.HasPrefix(trimmed, "Legend:") || strings.HasPrefix(trimmed, "NIC Legend:") {
		mr.complete = true
		return true, nil
	}
	return false, mr.row(line)
}

// header reads the column header: device columns, then affinity columns.
func (mr *matrixReader) header(line, trimmed string) error {
	m := &matrix{}
	inTail := false
	for _, f := range headerFields(line) {
		switch {
		case isAffinityColumn(f.text):
			inTail = true
			m.tail = append(m.tail, f.text)
		case inTail:
			// An affinity column this parser does not know; keep its
			// place so the cells after it line up.
			m.tail = append(m.tail, f.text)
		default:
			mr.cols = append(mr.cols, f)
		}
	}
	for j, c := range mr.cols {
		if !gpuLabel.MatchString(c.text) {
			continue
		}
		if want := fmt.Sprintf("GPU%d", len(mr.gpuCol)); c.text != want {
			return mr.errorf(c.col, topology.ErrSyntax, "column %s where %s was expected", c.text, want)
		}
		mr.gpuCol = append(mr.gpuCol, j)
	}
	if len(mr.gpuCol) == 0 {
		return mr.errorf(0, topology.ErrWrongTool, "first line %q is not a GPU matrix header", clip(trimmed))
	}
	m.nGPU = len(mr.gpuCol)
	mr.m = m
	return nil
}

// row reads one matrix row; NIC rows are skipped.
func (mr *matrixReader) row(line string) error {
	m := mr.m
	tabbed := strings.Contains(line, "\t")
	var fs []field
	if tabbed {
		fs = tabFields(line)
	} else {
		fs = spaceFields(line)
	}
	label := fs[0]
	if !gpuLabel.MatchString(label.text) {
		return nil // a NIC row (NICn, mlx5_n, ...): not ours
	}
	k := len(m.cells)
	if k >= m.nGPU {
		return mr.errorf(label.col, topology.ErrNotSquare, "row %s but the header has %d GPU columns", label.text, m.nGPU)
	}
	if want := fmt.Sprintf("GPU%d", k); label.text != want {
		return mr.errorf(label.col, topology.ErrNotSquare, "row %s where %s was expected", label.text, want)
	}
	body := fs[1:]
	if len(body) < len(mr.cols) {
		err := topology.ErrNotSquare
		if !mr.lr.Terminated() {
			err = topology.ErrTruncated
		}
		return mr.errorf(len(line), err, "row %s has %d cells, the header has %d columns", label.text, len(body), len(mr.cols))
	}
	row := make([]field, m.nGPU)
	for g, j := range mr.gpuCol {
		row[g] = body[j]
	}
	tail, err := alignTail(body[len(mr.cols):], len(m.tail), tabbed)
	if err != nil {
		return mr.errorf(body[len(mr.cols)].col, topology.ErrSyntax, "row %s: %v", label.text, err)
	}
	m.cells = append(m.cells, row)
	m.tails = append(m.tails, tail)
	m.rowLine = append(m.rowLine, mr.lr.Line())
	return nil
}

// finish checks that every GPU column has its row.
func (mr *matrixReader) finish() (*matrix, error) {
	m := mr.m
	switch {
	case m == nil:
		return nil, mr.lr.ErrorAt(0, 0, topology.ErrEmpty, "")
	case len(m.cells) < m.nGPU && mr.complete:
		return nil, mr.errorf(0, topology.ErrNotSquare, "%d GPU rows, the header has %d GPU columns", len(m.cells), m.nGPU)
	case len(m.cells) < m.nGPU:
		return nil, mr.errorf(mr.lastLen, topology.ErrTruncated, "%d of %d GPU rows", len(m.cells), m.nGPU)
	}
	return m, nil
}

// alignTail matches a row's cells after the device columns to the n
// affinity columns of the header. nvidia-smi prints an extra empty cell
// before "GPU NUMA ID" ("0\t\tN/A"), so with tabs, surplus empty cells are
// dropped: trailing ones first, then the last one before a non-empty
// cell. With tabs expanded, empty cells are invisible, so fewer cells are
// aligned to the right: the cell that goes missing in real output is an
// empty CPU Affinity (NUMA columns print N/A instead).
func alignTail(cells []field, n int, tabbed bool) ([]field, error) {
	cells = append([]field(nil), cells...)
	if tabbed {
		for len(cells) > n && cells[len(cells)-1].text == "" {
			cells = cells[:len(cells)-1]
		}
		for len(cells) > n {
			drop := -1
			for i := len(cells) - 2; i >= 0; i-- {
				if cells[i].text == "" && cells[i+1].text != "" {
					drop = i
					break
				}
			}
			if drop < 0 {
				break
			}
			cells = append(cells[:drop], cells[drop+1:]...)
		}
		if len(cells) > n {
			return nil, fmt.Errorf("%d cells after the device columns, the header has %d", len(cells), n)
		}
		for len(cells) < n {
			cells = append(cells, field{})
		}
		return cells, nil
	}
	if len(cells) > n {
		return nil, fmt.Errorf("%d cells after the device columns, the header has %d", len(cells), n)
	}
	out := make([]field, n-len(cells), n)
	return append(out, cells...), nil
}

// ParseTopo parses `nvidia-smi topo -m` or `nvidia-smi topo -mp`: a header
// row of device columns (GPUn, then NICn or NIC names such as mlx5_0)
// followed by any of the "CPU Affinity", "NUMA Affinity" and "GPU NUMA ID"
// columns, one row per device, then an optional Legend and NIC Legend,
// which are ignored, as are NIC rows and columns. It accepts real tabs or
// tabs expanded to spaces, ANSI SGR escapes (drivers since ~r550 underline
// the header even into a pipe), a header with or without its leading tab,
// CRLF line ends and a missing final newline.
//
// Errors are *topology.ParseError with Source SourceTopo, wrapping
// ErrEmpty (empty input), ErrWrongTool (the first line is not a GPU
// matrix header, or the cells are `topo -p2p` statuses), ErrNotSquare
// (GPU rows and columns disagree), ErrTruncated (input ends inside the
// matrix), ErrUnknownLinkType (a cell other than X, NV#, PIX, PXB, PHB,
// NODE, SYS, SOC), ErrBadNumber or ErrSyntax. Column counts bytes after
// ANSI escapes are removed.
func ParseTopo(r io.Reader) (*Topo, error) {
	m, err := readMatrix(r, SourceTopo)
	if err != nil {
		return nil, err
	}
	t := &Topo{GPUs: make([]TopoGPU, m.nGPU), Cells: make([][]string, m.nGPU)}
	for i := 0; i < m.nGPU; i++ {
		line := m.rowLine[i]
		t.Cells[i] = make([]string, m.nGPU)
		for j, c := range m.cells[i] {
			if err := checkTopoCell(c.text, i == j); err != nil {
				return nil, topology.NewParseError(SourceTopo, line, c.col, err, "GPU%d/GPU%d cell %q", i, j, clip(c.text))
			}
			if j < i && c.text != t.Cells[j][i] {
				return nil, topology.NewParseError(SourceTopo, line, c.col, topology.ErrSyntax, "GPU%d/GPU%d cell %q differs from GPU%d/GPU%d cell %q", i, j, c.text, j, i, t.Cells[j][i])
			}
			t.Cells[i][j] = c.text
		}
		g := TopoGPU{NUMAAffinity: -1, GPUNUMAID: -1}
		for k, name := range m.tail {
			c := m.tails[i][k]
			switch name {
			case colCPU:
				if c.text == "" || c.text == "N/A" {
					continue
				}
				cpus, err := topology.ParseCPUList(c.text)
				if err != nil {
					return nil, topology.NewParseError(SourceTopo, line, c.col, topology.ErrSyntax, "GPU%d CPU Affinity: %v", i, err)
				}
				g.CPUAffinity = cpus
			case colNUMA, colGPUNUMA:
				n, err := numaCell(c.text)
				if err != nil {
					return nil, topology.NewParseError(SourceTopo, line, c.col, topology.ErrBadNumber, "GPU%d %s %q", i, name, clip(c.text))
				}
				if name == colNUMA {
					g.NUMAAffinity = n
				} else {
					g.GPUNUMAID = n
				}
			}
		}
		t.GPUs[i] = g
	}
	return t, nil
}

// checkTopoCell says whether a topo -m cell is known; self says it is on
// the diagonal.
func checkTopoCell(s string, self bool) error {
	if self {
		if s == "X" {
			return nil
		}
		return fmt.Errorf("%w: diagonal cell is not X", topology.ErrSyntax)
	}
	if _, _, ok := linkKind(s); ok {
		return nil
	}
	if p2pStatus[s] {
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

// maxNVLinks bounds the NV# count: an NVSwitch H100/H200 has 18 links,
// B200 18 NVLink-5 links; anything far above is not a real count.
const maxNVLinks = 1024

// linkKind classifies a topo -m cell: the link type, the NVLink count
// (0 for PCIe) and whether it is known.
func linkKind(s string) (topology.LinkType, int, bool) {
	switch s {
	case topology.LevelPIX, topology.LevelPXB, topology.LevelPHB, topology.LevelNODE, topology.LevelSYS, "SOC":
		return topology.LinkPCIe, 0, true
	}
	if mm := nvCell.FindStringSubmatch(s); mm != nil {
		n, err := strconv.Atoi(mm[1])
		if err == nil && n >= 1 && n <= maxNVLinks {
			return topology.LinkNVLink, n, true
		}
	}
	return "", 0, false
}

// P2P is `nvidia-smi topo -p2p <r|w|n|a|p>`: the peer-to-peer status of
// every GPU pair.
type P2P struct {
	// Status[i][j] is the cell of row GPUi, column GPUj: "X" on the
	// diagonal, else "OK", "CNS" (chipset not supported), "GNS" (GPU not
	// supported), "TNS" (topology not supported), "NS" (not supported) or
	// "U" (unknown).
	Status [][]string
}

// OK says whether GPUs a and b can use peer-to-peer transfers.
func (p *P2P) OK(a, b int) bool {
	return a >= 0 && b >= 0 && a < len(p.Status) && b < len(p.Status) && p.Status[a][b] == "OK"
}

// ParseP2P parses `nvidia-smi topo -p2p r` (or w, n, a, p): the same
// matrix layout as topo -m, with status cells and the self cell "X", rows
// possibly indented by a space. Errors are *topology.ParseError with
// Source SourceP2P, wrapping the sentinels ParseTopo uses; a topo -m
// matrix gives ErrWrongTool.
func ParseP2P(r io.Reader) (*P2P, error) {
	m, err := readMatrix(r, SourceP2P)
	if err != nil {
		return nil, err
	}
	p := &P2P{Status: make([][]string, m.nGPU)}
	for i := range m.cells {
		p.Status[i] = make([]string, m.nGPU)
		for j, c := range m.cells[i] {
			var bad error
			switch {
			case i == j && c.text != "X":
				bad = fmt.Errorf("%w: diagonal cell is not X", topology.ErrSyntax)
			case i != j && !p2pStatus[c.text]:
				bad = topology.ErrUnknownLinkType
				if _, _, ok := linkKind(c.text); ok {
					bad = fmt.Errorf("%w: this is `nvidia-smi topo -m` output, not `topo -p2p`", topology.ErrWrongTool)
				}
			}
			if bad != nil {
				return nil, &topology.ParseError{Source: SourceP2P, Line: m.rowLine[i], Column: c.col,
					Err: fmt.Errorf("%w: GPU%d/GPU%d cell %q", bad, i, j, clip(c.text))}
			}
			p.Status[i][j] = c.text
		}
	}
	return p, nil
}

// clip shortens s for an error message.
func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}
