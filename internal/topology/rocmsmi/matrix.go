package rocmsmi

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/amdrun/amdrun/internal/topology"
)

// cell is one parsed matrix cell.
type cell struct {
	ok   bool // the cell holds a value (not N/A)
	a, b int64
	s    string // a link type, an access or "min-max" bandwidth
}

// parseCell reads one matrix cell of the given kind.
func parseCell(kind sectionKind, s string, diag bool) (cell, error) {
	if unknownValue(s) || s == "XXXX" {
		return cell{}, nil
	}
	switch kind {
	case kindWeight, kindHops:
		n, err := strconv.ParseInt(s, 10, 32)
		if err != nil || n < 0 {
			return cell{}, fmt.Errorf("%w: %q", topology.ErrBadNumber, s)
		}
		return cell{ok: true, a: n}, nil
	case kindType:
		switch u := strings.ToUpper(s); {
		case u == "XGMI" || u == "PCIE":
			return cell{ok: true, s: u}, nil
		case diag && u == "0":
			return cell{}, nil
		}
		return cell{}, fmt.Errorf("%w: %q", topology.ErrUnknownLinkType, s)
	case kindAccess:
		if l := strings.ToLower(s); l == "true" || l == "false" {
			return cell{ok: true, s: l}, nil
		}
		return cell{}, fmt.Errorf("%w: access %q is not True or False", topology.ErrSyntax, s)
	case kindBW:
		lo, hi, found := strings.Cut(s, "-")
		if !found {
			return cell{}, fmt.Errorf("%w: bandwidth %q is not min-max", topology.ErrBadNumber, s)
		}
		a, err1 := strconv.ParseInt(lo, 10, 64)
		b, err2 := strconv.ParseInt(hi, 10, 64)
		if err1 != nil || err2 != nil || a < 0 || b < 0 {
			return cell{}, fmt.Errorf("%w: bandwidth %q", topology.ErrBadNumber, s)
		}
		if a > b {
			return cell{}, fmt.Errorf("%w: bandwidth %q has min above max", topology.ErrSyntax, s)
		}
		return cell{ok: true, a: a, b: b, s: fmt.Sprintf("%d-%d", a, b)}, nil
	}
	return cell{}, nil
}

// matrix parses the GPU x GPU table of section sec, at or after the next line.
func (p *textParser) matrix(sec sectionInfo) error {
	cols, err := p.matrixStart(sec)
	if cols == nil || err != nil {
		return err
	}
	rows, rowLine, err := p.matrixRows(sec, cols)
	if err != nil {
		return err
	}
	linkTypes := false // off the diagonal
	for r, row := range rows {
		for c, tk := range row {
			u := strings.ToUpper(tk.S)
			linkTypes = linkTypes || c != r && (u == "XGMI" || u == "PCIE")
		}
	}
	if linkTypes && (sec.kind == kindWeight || sec.kind == kindHops) {
		// rocm-smi on a partitioned MI300 prints link types under the
		// Weight title (rocm_smi_lib 6.1.0 changelog, known issue 3).
		p.retitled = append(p.retitled, fmt.Sprintf("%q", sec.title))
		sec.kind = kindType
	}
	n := len(cols)
	grid := make([]cell, n*n)
	for r := 0; r < n; r++ {
		for c, tk := range rows[r] {
			v, err := parseCell(sec.kind, tk.S, c == r)
			if err != nil {
				return topology.NewParseError(sec.source, rowLine[r], tk.Col, err, "")
			}
			if tk.S == "XXXX" && r < c {
				p.xxxx = append(p.xxxx, fmt.Sprintf("GPU%d-GPU%d", cols[r], cols[c]))
			}
			grid[r*n+c] = v
		}
	}
	if sec.kind == kindWeight || sec.kind == kindHops {
		// A row out of place would otherwise turn a pair into another link silently.
		if f := topology.CheckCountMatrix(n, func(r, c int) (int64, bool) { return grid[r*n+c].a, grid[r*n+c].ok }); f != nil {
			label := func(i int) string { return fmt.Sprintf("GPU%d", cols[i]) }
			return topology.NewParseError(sec.source, rowLine[f.Row], rows[f.Row][f.Col].Col, topology.ErrInconsistent,
				"%s", f.Describe(label, strings.Fields(sec.title)[0])) // "weight" or "hops"
		}
	}
	p.r.list(sec.title, cols...)
	p.commit(sec, cols, grid)
	return nil
}

// matrixStart reads a matrix's column header and returns its GPUs;
// a banner first means no table (nil, and the banner is Unread).
func (p *textParser) matrixStart(sec sectionInfo) ([]int, error) {
	for line, more := p.next(); more; line, more = p.next() {
		t := strings.TrimSpace(line)
		_, banner := bannerTitle(t)
		switch {
		case t == "":
		case banner:
			p.r.note("rocm-smi: the %q section has no table (the next section title is at line %d); is the output damaged?", sec.title, p.lr.Line())
			p.lr.Unread()
			return nil, nil
		case gpuLabel().MatchString(fields(t)[0].S):
			// A column header of GPUn labels.
			head := fields(line)
			if len(head) > maxDevices {
				return nil, p.errHere(sec.source, head[maxDevices].Col, topology.ErrSyntax, "more than %d columns", maxDevices)
			}
			cols := make([]int, len(head))
			for c, tk := range head {
				m := gpuLabel().FindStringSubmatch(tk.S)
				if m == nil {
					return nil, p.errHere(sec.source, tk.Col, topology.ErrSyntax, "column header %q is not GPUn", tk.S)
				}
				n, err := parseIndex(m[1])
				if err != nil {
					return nil, p.errHere(sec.source, tk.Col, err, "")
				}
				if slices.Contains(cols[:c], n) {
					return nil, p.errHere(sec.source, tk.Col, topology.ErrSyntax, "column %s twice", tk.S)
				}
				cols[c] = n
			}
			return cols, nil
		case !logLine(t) || strings.HasPrefix(t, "ERROR:"):
			p.toolLines = append(p.toolLines, t)
		}
	}
	return nil, p.errHere(sec.source, 0, topology.ErrTruncated, "no table after the section title")
}

// matrixRows reads each row's cells and line, then the line after.
func (p *textParser) matrixRows(sec sectionInfo, cols []int) ([][]topology.Field, []int, error) {
	n := len(cols)
	rows := make([][]topology.Field, n)
	rowLine := make([]int, n)
	for r := 0; r < n; r++ {
		line, err := p.matrixRowLine(sec, r, n)
		if err != nil {
			return nil, nil, err
		}
		toks := fields(line)
		if !gpuLabel().MatchString(toks[0].S) {
			return nil, nil, p.errHere(sec.source, 0, topology.ErrNotSquare, "%d rows for %d columns", r, n)
		}
		if want := fmt.Sprintf("GPU%d", cols[r]); toks[0].S != want {
			return nil, nil, p.errHere(sec.source, 0, topology.ErrNotSquare, "row %s where %s expected", toks[0].S, want)
		}
		if len(toks)-1 != n {
			return nil, nil, p.errHere(sec.source, topology.CountCol(line, toks, n+1), topology.ErrNotSquare, "%d cells in row %s for %d columns", len(toks)-1, toks[0].S, n)
		}
		rows[r], rowLine[r] = toks[1:], p.lr.Line()
	}
	// A GPU row after the last one is refused; any other line is Unread.
	for line, ok := p.next(); ok; line, ok = p.next() {
		switch t := strings.TrimSpace(line); {
		case t == "" || logLine(t):
			if err := p.plainLine(line, t, otherSection); err != nil {
				return nil, nil, err
			}
		case gpuLabel().MatchString(fields(t)[0].S):
			return nil, nil, p.errHere(sec.source, 0, topology.ErrNotSquare, "more rows than the %d columns", n)
		default:
			p.lr.Unread()
			return rows, rowLine, nil
		}
	}
	return rows, rowLine, nil
}

// matrixRowLine reads the line of row r of n, past log lines. A blank line
// ends the table too early (ErrNotSquare), unless only blank lines follow
// (ErrTruncated at the last line that is not blank, as at the end of input).
func (p *textParser) matrixRowLine(sec sectionInfo, r, n int) (string, error) {
	blank := 0 // the first blank line, 0: none yet
	for {
		line, ok := p.next()
		t := strings.TrimSpace(line)
		switch {
		case !ok:
			return "", topology.NewParseError(sec.source, p.lastFull, 0, topology.ErrTruncated, "%d of %d rows", r, n)
		case blank == 0 && logLine(t): // skipped
		case blank == 0 && t != "":
			return line, nil
		case t == "":
			blank = cmp.Or(blank, p.lr.Line())
		default:
			return "", topology.NewParseError(sec.source, blank, 0, topology.ErrNotSquare, "%d rows for %d columns", r, n)
		}
	}
}

// commit stores a matrix's upper triangle, noting where the lower disagrees.
func (p *textParser) commit(sec sectionInfo, cols []int, grid []cell) {
	n := len(cols)
	for a := 0; a < n; a++ {
		for b := a + 1; b < n; b++ {
			up, lo := grid[a*n+b], grid[b*n+a]
			v, differ := cmp.Or(up, lo), up.ok && lo.ok && up != lo // a cell not ok is zero
			if differ && sec.kind != kindType {
				// An access or a bandwidth (Weight and Hops were checked).
				p.r.note("%s: GPU%d-GPU%d reads %s but GPU%d-GPU%d reads %s; using the first",
					sec.source, cols[a], cols[b], up.s, cols[b], cols[a], lo.s)
			}
			if !v.ok {
				continue
			}
			pr := p.r.pair(cols[a], cols[b])
			switch sec.kind {
			case kindWeight:
				pr.Weight = int(v.a)
			case kindHops:
				pr.Hops = int(v.a)
			case kindType:
				pr.Type = v.s
				if differ {
					pr.TypeOther = lo.s // Model decides by weight and hops, never by row order (issue 24)
				}
			case kindBW:
				pr.MinBandwidth, pr.MaxBandwidth = v.a, v.b
			}
		}
	}
	if sec.kind == kindAccess {
		// Accessibility does not shape the model, but it names the devices.
		for _, c := range cols {
			p.r.device(c)
		}
	}
}
