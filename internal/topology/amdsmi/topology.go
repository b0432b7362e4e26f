package amdsmi

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/amdrun/amdrun/internal/topology"
)

// Source names of the parsers, used in ParseError.Source.
const (
	SourceTopology     = "amd-smi topology"
	SourceTopologyJSON = "amd-smi topology --json"
	SourceList         = "amd-smi list"
	SourceListJSON     = "amd-smi list --json"
	SourceDefault      = "amd-smi"
	SourceProcessJSON  = "amd-smi process --json"
	SourceMemUsageJSON = "amd-smi metric --mem-usage --json"
)

// MaxGPUs bounds the size of a topology table; larger inputs are refused
// as malformed rather than allocated.
const MaxGPUs = 256

// Pair is what amd-smi reports about the path from one GPU to another.
type Pair struct {
	// Access is "ENABLED" or "DISABLED" (peer access), "" when not reported.
	Access string
	// Weight is the KFD link weight, -1 when not reported or N/A.
	Weight int
	// Hops is the number of hops, -1 when not reported or N/A.
	Hops int
	// Type is the link type as printed, upper case ("XGMI", "PCIE",
	// "SELF"); "" when not reported or N/A.
	Type string
	// MinBW and MaxBW are the NUMA BW figures in MB/s; 0 when not reported,
	// N/A, or "0-0" (amd-smi 26 on MI355X prints 0-0 for XGMI pairs).
	MinBW, MaxBW int64
}

// Topology is the pairwise description of a node's GPUs that `amd-smi
// topology` prints, in text or JSON.
type Topology struct {
	// GPUs holds amd-smi's GPU index of each row, in the tool's order.
	// The text tables do not print indices; there they are 0..N-1.
	GPUs []int
	// BDFs holds each row's PCI address in lower case; "" when the source
	// does not give it (the old JSON schema).
	BDFs []string
	// Pairs[i][j] describes the path from row i to row j.
	Pairs [][]Pair
}

func newTopology(n int) *Topology {
	t := &Topology{GPUs: make([]int, n), BDFs: make([]string, n), Pairs: make([][]Pair, n)}
	for i := range t.Pairs {
		t.GPUs[i] = i
		t.Pairs[i] = make([]Pair, n)
		for j := range t.Pairs[i] {
			t.Pairs[i][j] = Pair{Weight: -1, Hops: -1}
		}
	}
	return t
}

// field is one whitespace-separated token and its column.
type field = topology.Field

var splitFields = topology.SplitFields

// newScanner returns a line scanner that accepts lines up to 1 MiB.
func newScanner(r io.Reader) *bufio.Scanner { return topology.NewScanner(r) }

// scanErr turns a scanner failure after line n into an error.
func scanErr(src string, n int, err error) error {
	if errors.Is(err, bufio.ErrTooLong) {
		return &topology.ParseError{Source: src, Line: n + 1, Err: fmt.Errorf("%w: line too long", topology.ErrSyntax)}
	}
	return fmt.Errorf("%s: %w", src, err)
}

// tableTitle reports whether s is a table title such as "WEIGHT TABLE:"
// and returns it without the colon.
func tableTitle(s string) (string, bool) {
	if !strings.HasSuffix(s, "TABLE:") {
		return "", false
	}
	for _, c := range s {
		if !(c >= 'A' && c <= 'Z' || c == ' ' || c == '-' || c == '_' || c == ':') {
			return "", false
		}
	}
	return strings.TrimSuffix(s, ":"), true
}

// ParseTopology parses the text output of `amd-smi topology`. Every table
// must have the same BDF columns and one row per column; tables the parser
// does not use (CACHE COHERANCY, ATOMICS, DMA, BI-DIRECTIONAL, ones added
// later) are checked for shape and skipped, as is the Legend. Text outside
// tables (warnings) is ignored. Malformed input gives a *topology.ParseError
// wrapping ErrSyntax, ErrNotSquare, ErrBadNumber, ErrUnknownLinkType,
// ErrTruncated, ErrWrongTool (no table at all) or ErrNoDevices (empty input).
func ParseTopology(r io.Reader) (*Topology, error) {
	const src = SourceTopology
	perr := func(line, col int, err error) error {
		return &topology.ParseError{Source: src, Line: line, Column: col, Err: err}
	}
	var (
		t          *Topology
		table      string // current table title, "" outside tables
		wantHeader bool
		rows       int
		legend     bool
		sawText    bool
		n          int
		lineNo     int
	)
	truncated := func(line int) error {
		if table == "" {
			return nil
		}
		if wantHeader {
			return perr(line, 0, fmt.Errorf("%w: %s has no header", topology.ErrTruncated, table))
		}
		if rows < n {
			return perr(line, 0, fmt.Errorf("%w: %s has %d of %d rows", topology.ErrTruncated, table, rows, n))
		}
		return nil
	}
	sc := newScanner(r)
	for sc.Scan() {
		lineNo++
		line := strings.TrimRight(sc.Text(), "\r")
		trimmed := strings.TrimSpace(line)
		if trimmed == "" {
			continue
		}
		sawText = true
		if title, ok := tableTitle(trimmed); ok {
			if err := truncated(lineNo); err != nil {
				return nil, err
			}
			table, wantHeader, rows, legend = title, true, 0, false
			continue
		}
		if strings.HasPrefix(trimmed, "Legend") && strings.HasSuffix(trimmed, ":") {
			if err := truncated(lineNo); err != nil {
				return nil, err
			}
			table, legend = "", true
			continue
		}
		if legend || table == "" {
			continue
		}
		fs := splitFields(line)
		if wantHeader {
			bdfs := make([]string, len(fs))
			for i, f := range fs {
				b, ok := normBDF(f.S)
				if !ok {
					return nil, perr(lineNo, f.Col, fmt.Errorf("%w: %s header: %q is not a PCI address", topology.ErrSyntax, table, f.S))
				}
				bdfs[i] = b
			}
			if len(bdfs) > MaxGPUs {
				return nil, perr(lineNo, fs[MaxGPUs].Col, fmt.Errorf("%w: more than %d GPUs", topology.ErrSyntax, MaxGPUs))
			}
			if t == nil {
				seen := map[string]bool{}
				for i, b := range bdfs {
					if seen[b] {
						return nil, perr(lineNo, fs[i].Col, fmt.Errorf("%w: %s header: %s appears twice", topology.ErrSyntax, table, b))
					}
					seen[b] = true
				}
				n = len(bdfs)
				t = newTopology(n)
				copy(t.BDFs, bdfs)
			} else {
				if len(bdfs) != n {
					return nil, perr(lineNo, 0, fmt.Errorf("%w: %s has %d columns, the first table %d", topology.ErrNotSquare, table, len(bdfs), n))
				}
				for i, b := range bdfs {
					if b != t.BDFs[i] {
						return nil, perr(lineNo, fs[i].Col, fmt.Errorf("%w: %s column %d is %s, the first table has %s", topology.ErrSyntax, table, i, b, t.BDFs[i]))
					}
				}
			}
			wantHeader, rows = false, 0
			continue
		}
		if rows == n {
			return nil, perr(lineNo, 0, fmt.Errorf("%w: %s has more than %d rows", topology.ErrNotSquare, table, n))
		}
		if len(fs) != n+1 {
			col := len(line)
			if len(fs) > n+1 {
				col = fs[n+1].Col
			}
			return nil, perr(lineNo, col, fmt.Errorf("%w: %s row has %d cells, want %d", topology.ErrNotSquare, table, len(fs)-1, n))
		}
		if b, ok := normBDF(fs[0].S); !ok || b != t.BDFs[rows] {
			return nil, perr(lineNo, fs[0].Col, fmt.Errorf("%w: %s row %d is labelled %q, want %s", topology.ErrSyntax, table, rows, fs[0].S, t.BDFs[rows]))
		}
		for j, f := range fs[1:] {
			if err := setCell(&t.Pairs[rows][j], table, f.S); err != nil {
				return nil, perr(lineNo, f.Col, fmt.Errorf("%s: %w", table, err))
			}
		}
		rows++
	}
	if err := sc.Err(); err != nil {
		return nil, scanErr(src, lineNo, err)
	}
	if err := truncated(lineNo); err != nil {
		return nil, err
	}
	if t == nil {
		if !sawText {
			return nil, perr(0, 0, topology.ErrNoDevices)
		}
		return nil, perr(0, 0, fmt.Errorf("%w: no amd-smi topology table", topology.ErrWrongTool))
	}
	if n == 0 {
		return nil, perr(0, 0, topology.ErrNoDevices)
	}
	return t, nil
}

// setCell stores one table cell into p; tables it does not know are
// ignored.
func setCell(p *Pair, table, s string) error {
	na := strings.EqualFold(s, "N/A")
	var err error
	switch table {
	case "ACCESS TABLE":
		switch u := strings.ToUpper(s); u {
		case "ENABLED", "DISABLED":
			p.Access = u
		case "SELF", "N/A":
		default:
			return fmt.Errorf("%w: access %q", topology.ErrSyntax, s)
		}
	case "WEIGHT TABLE":
		if !na {
			p.Weight, err = smallInt(s)
		}
	case "HOPS TABLE":
		if !na {
			p.Hops, err = smallInt(s)
		}
	case "LINK TYPE TABLE":
		p.Type, err = linkType(s)
	case "NUMA BW TABLE":
		if !na {
			p.MinBW, p.MaxBW, err = minMax(s)
		}
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

// minMax parses a NUMA bandwidth cell "min-max" in MB/s. A plain number
// is both.
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
	if a > b {
		a, b = b, a
	}
	return a, b, nil
}
