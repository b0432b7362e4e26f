// Package amdsmi reads the output of AMD's amd-smi (ROCm 6 and later) into
// a topology.Model: one pure parser per command (ParseDefault's box table
// is the only one with the HIP-ID), Build joins their values, JoinPartitions
// joins physical GPUs with their partitions, and Discover runs the tool.
package amdsmi

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/amdrun/amdrun/internal/topology"
)

// Source names of the parsers, used in ParseError.Source.
const (
	SourceTopology     = "amd-smi topology"
	SourceTopologyJSON = "amd-smi topology --json"
	SourceListJSON     = "amd-smi list --json"
	SourceDefault      = "amd-smi"
	SourceProcessJSON  = "amd-smi process --json"
	SourceMemUsageJSON = "amd-smi metric --mem-usage --json"
)

// MaxGPUs bounds the size of a table; larger inputs are refused as malformed.
const MaxGPUs = 256

// Pair is what amd-smi reports about the path from one GPU to another; a
// figure not given is "", -1 or 0.
type Pair struct {
	Access string // "ENABLED" or "DISABLED" (peer access)
	Weight int    // the KFD link weight
	Hops   int
	Type   string // as printed, upper case: "XGMI", "PCIE", "SELF"
	// MinBW and MaxBW are NUMA BW in MB/s ("0-0", amd-smi 26 on MI355X, is 0).
	MinBW, MaxBW int64
}

// Topology is what `amd-smi topology` prints, in text or JSON.
type Topology struct {
	GPUs   []int    // amd-smi's GPU index of each row (0..N-1 for the text tables)
	BDFs   []string // each row's PCI address in lower case, "" when not given
	Pairs  [][]Pair // Pairs[i][j]: the path from row i to row j
	Tables []string // the tables held ("WEIGHT TABLE"); for --json, those its fields stand for
}

// WantTables are the tables a model needs, all printed since ROCm 6.1.
var WantTables = []string{"ACCESS TABLE", "WEIGHT TABLE", "HOPS TABLE", "LINK TYPE TABLE", "NUMA BW TABLE"}

// has reports whether the output held the table.
func (t *Topology) has(table string) bool { return slices.Contains(t.Tables, table) }

func newTopology(n int) *Topology {
	t := &Topology{GPUs: make([]int, n), BDFs: make([]string, n), Pairs: make([][]Pair, n)}
	for i := range t.Pairs {
		t.GPUs[i] = i
		t.Pairs[i] = slices.Repeat([]Pair{{Weight: -1, Hops: -1}}, n)
	}
	return t
}

// tableTitle returns s, a title such as "WEIGHT TABLE:", without its colon.
func tableTitle(s string) (string, bool) {
	if !strings.HasSuffix(s, "TABLE:") || strings.Trim(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZ -_:") != "" {
		return "", false
	}
	return strings.TrimSuffix(s, ":"), true
}

// ParseTopology parses the text output of `amd-smi topology`. Every table
// must have the same BDF columns and one row per column; tables it does not
// use are checked for shape and skipped, as is the Legend. A stray line in
// or right after a table ("[output truncated]") is an error quoting it, as
// is a failed Topology.check. Topology.Tables lists the tables found.
func ParseTopology(r io.Reader) (*Topology, error) {
	p := &topoParser{lr: topology.NewLineReader(r, SourceTopology), at: map[string][]rowPos{}}
	if err := cmp.Or(p.lr.ForEach(p.line), p.endTable()); err != nil {
		return nil, err
	}
	switch {
	case p.t == nil && !p.sawText:
		return nil, topology.NewParseError(p.lr.Source, 0, 0, topology.ErrEmpty, "")
	case p.t == nil:
		return nil, topology.NewParseError(p.lr.Source, 0, 0, topology.ErrWrongTool, "no amd-smi topology table")
	}
	if f := p.t.check(); f != nil {
		pos := p.at[f.table][f.row]
		return nil, topology.NewParseError(p.lr.Source, pos.line, pos.cols[f.col], topology.ErrInconsistent, "%s: %s", f.table, f.msg)
	}
	return p.t, nil
}

// rowPos is where a table row was read: its line and each cell's column.
type rowPos struct {
	line int
	cols []int
}

// topoParser holds what ParseTopology has read so far.
type topoParser struct {
	lr         *topology.LineReader
	t          *Topology // nil until the first table header
	table      string    // current table title, "" outside tables
	wantHeader bool      // the current table's header line is next
	rows       int       // rows read of the current table
	legend     bool      // in the Legend, which ends the tables
	sawText    bool
	at         map[string][]rowPos // per table, where each row was read
}

func (p *topoParser) line(line string) error {
	trimmed := strings.TrimSpace(line)
	if trimmed == "" {
		return nil
	}
	p.sawText = true
	title, isTitle := tableTitle(trimmed)
	if legend := strings.HasPrefix(trimmed, "Legend") && strings.HasSuffix(trimmed, ":"); isTitle || legend {
		if err := p.endTable(); err != nil {
			return err
		}
		if p.t != nil && p.t.has(title) {
			return p.lr.Errorf(0, topology.ErrSyntax, "%s appears twice", title)
		}
		p.table, p.wantHeader, p.rows, p.legend = title, isTitle, 0, legend
		return nil
	}
	if p.legend || p.table == "" {
		return nil
	}
	fs := topology.SplitFields(line)
	if p.wantHeader {
		return p.header(fs)
	}
	if _, ok := topology.NormalizePCI(fs[0].S); ok {
		return p.row(line, fs)
	}
	// A line in or right after a table that is not one of its rows.
	if len(trimmed) > 60 {
		trimmed = trimmed[:60] + "..."
	}
	sentinel := topology.ErrSyntax
	// An editor's mark that output was left out ("[output truncated]", "<snip>")?
	if l := strings.ToLower(trimmed); strings.Contains(l, "truncat") || strings.Contains(l, "snip") ||
		strings.Contains(l, "omitted") || strings.Trim(l, ".… []()<>") == "" {
		sentinel = topology.ErrTruncated
	}
	if n := len(p.t.GPUs); p.rows < n {
		return p.lr.Errorf(0, sentinel, "%s has %d of %d rows, then %q", p.table, p.rows, n, trimmed)
	}
	return p.lr.Errorf(0, sentinel, "%q after the %s, where a table title or the end was expected", trimmed, p.table)
}

// endTable checks that the table being read, if any, is complete.
func (p *topoParser) endTable() error {
	switch {
	case p.table == "":
		return nil
	case p.wantHeader:
		return p.lr.Errorf(0, topology.ErrTruncated, "%s has no header", p.table)
	case p.rows < len(p.t.GPUs):
		return p.lr.Errorf(0, topology.ErrTruncated, "%s has %d of %d rows", p.table, p.rows, len(p.t.GPUs))
	}
	return nil
}

// header reads a table's header of BDFs; the first table fixes the GPUs.
func (p *topoParser) header(fs []topology.Field) error {
	bdfs := make([]string, len(fs))
	for i, f := range fs {
		b, ok := topology.NormalizePCI(f.S)
		if !ok {
			return p.lr.Errorf(f.Col, topology.ErrSyntax, "%s header: %q is not a PCI address", p.table, f.S)
		}
		bdfs[i] = b
	}
	if len(bdfs) > MaxGPUs {
		return p.lr.Errorf(fs[MaxGPUs].Col, topology.ErrSyntax, "more than %d GPUs", MaxGPUs)
	}
	if p.t == nil {
		for i, b := range bdfs {
			if slices.Contains(bdfs[:i], b) {
				return p.lr.Errorf(fs[i].Col, topology.ErrSyntax, "%s header: %s appears twice", p.table, b)
			}
		}
		p.t = newTopology(len(bdfs))
		copy(p.t.BDFs, bdfs)
	} else if len(bdfs) != len(p.t.BDFs) {
		return p.lr.Errorf(0, topology.ErrNotSquare, "%s has %d columns, the first table %d", p.table, len(bdfs), len(p.t.BDFs))
	}
	for i, b := range bdfs {
		if b != p.t.BDFs[i] {
			return p.lr.Errorf(fs[i].Col, topology.ErrSyntax, "%s column %d is %s, the first table has %s", p.table, i, b, p.t.BDFs[i])
		}
	}
	p.wantHeader, p.t.Tables = false, append(p.t.Tables, p.table)
	return nil
}

// row reads one table row: its BDF label and one cell per column.
func (p *topoParser) row(line string, fs []topology.Field) error {
	n := len(p.t.GPUs)
	if p.rows == n {
		return p.lr.Errorf(0, topology.ErrNotSquare, "%s has more than %d rows", p.table, n)
	}
	if len(fs) != n+1 {
		return p.lr.Errorf(topology.CountCol(line, fs, n+1), topology.ErrNotSquare, "%s row has %d cells, want %d", p.table, len(fs)-1, n)
	}
	if b, ok := topology.NormalizePCI(fs[0].S); !ok || b != p.t.BDFs[p.rows] {
		return p.lr.Errorf(fs[0].Col, topology.ErrSyntax, "%s row %d is labelled %q, want %s", p.table, p.rows, fs[0].S, p.t.BDFs[p.rows])
	}
	pos := rowPos{line: p.lr.Line(), cols: make([]int, n)}
	for j, f := range fs[1:] {
		if err := setCell(&p.t.Pairs[p.rows][j], p.table, f.S); err != nil {
			return topology.NewParseError(p.lr.Source, p.lr.Line(), f.Col, fmt.Errorf("%s: %w", p.table, err), "")
		}
		pos.cols[j] = f.Col
	}
	p.at[p.table] = append(p.at[p.table], pos)
	p.rows++
	return nil
}

// setCell stores one cell of table into p; other tables' are ignored.
func setCell(p *Pair, table, s string) error {
	na := strings.EqualFold(s, "N/A")
	var err error
	switch {
	case table == "ACCESS TABLE":
		switch u := strings.ToUpper(s); u {
		case "ENABLED", "DISABLED":
			p.Access = u
		case "SELF", "N/A":
		default:
			return fmt.Errorf("%w: access %q", topology.ErrSyntax, s)
		}
	case table == "WEIGHT TABLE" && !na:
		p.Weight, err = smallInt(s)
	case table == "HOPS TABLE" && !na:
		p.Hops, err = smallInt(s)
	case table == "LINK TYPE TABLE":
		p.Type, err = linkType(s)
	case table == "NUMA BW TABLE" && !na:
		p.MinBW, p.MaxBW, err = minMax(s)
	}
	return err
}

// smallInt parses a non-negative weight or hop count.
func smallInt(s string) (int, error) {
	v, err := strconv.Atoi(s)
	if err != nil || v < 0 || v > 1<<20 {
		return 0, fmt.Errorf("%w: %q", topology.ErrBadNumber, s)
	}
	return v, nil
}

// linkType checks a link type cell; N/A and SELF give "SELF" or "".
func linkType(s string) (string, error) {
	switch u := strings.ToUpper(s); u {
	case "XGMI", "PCIE", "SELF":
		return u, nil
	case "N/A", "UNKNOWN":
		return "", nil
	}
	return "", fmt.Errorf("%w: %q", topology.ErrUnknownLinkType, s)
}

// minMax parses a NUMA bandwidth "min-max" in MB/s; a plain number is both.
func minMax(s string) (int64, int64, error) {
	lo, hi, ok := strings.Cut(s, "-")
	if !ok {
		hi = lo
	}
	a, err1 := strconv.ParseInt(lo, 10, 64)
	b, err2 := strconv.ParseInt(hi, 10, 64)
	if err1 != nil || err2 != nil || a < 0 || b < 0 || a > 1<<40 || b > 1<<40 {
		return 0, 0, fmt.Errorf("%w: bandwidth %q", topology.ErrBadNumber, s)
	}
	return min(a, b), max(a, b), nil
}

// fault is the first cell (0-based) of a topology that breaks its shape.
type fault struct {
	table    string
	row, col int
	msg      string
}

// check catches a row or column out of place: topology.CheckCountMatrix
// on WEIGHT and HOPS, and SELF (or N/A) exactly on LINK TYPE's diagonal. An
// asymmetric LINK TYPE is left to topology.ResolveLinkType in Build.
func (t *Topology) check() *fault {
	n, label := len(t.BDFs), t.label
	counts := []struct {
		table, what string
		get         func(p Pair) int
	}{
		{"WEIGHT TABLE", "weight", func(p Pair) int { return p.Weight }},
		{"HOPS TABLE", "hops", func(p Pair) int { return p.Hops }},
	}
	for _, c := range counts {
		f := topology.CheckCountMatrix(n, func(r, col int) (int64, bool) {
			v := c.get(t.Pairs[r][col])
			return int64(v), v >= 0
		})
		if f != nil {
			return &fault{table: c.table, row: f.Row, col: f.Col, msg: f.Describe(label, c.what)}
		}
	}
	for r := 0; r < n; r++ {
		for c := 0; c < n; c++ {
			typ := t.Pairs[r][c].Type
			switch {
			case r == c && typ != "" && typ != "SELF":
				return &fault{table: "LINK TYPE TABLE", row: r, col: c,
					msg: fmt.Sprintf("%s's link to itself is %s, not SELF; a row or column is out of place", label(r), typ)}
			case r != c && typ == "SELF":
				return &fault{table: "LINK TYPE TABLE", row: r, col: c,
					msg: fmt.Sprintf("%s-%s is SELF; a row or column is out of place", label(r), label(c))}
			}
		}
	}
	return nil
}

// label names row i in messages: its PCI address, else "GPU n".
func (t *Topology) label(i int) string { return cmp.Or(t.BDFs[i], fmt.Sprintf("GPU %d", t.GPUs[i])) }
