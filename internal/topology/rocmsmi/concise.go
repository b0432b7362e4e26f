package rocmsmi

import (
	"strconv"
	"strings"

	"github.com/amdrun/amdrun/internal/topology"
)

// conciseTable is a concise table's layout and the rows read so far.
type conciseTable struct {
	sec  sectionInfo
	gen1 bool // ROCm 5.x's header ("GPU"); later ones may take two rows per GPU
	// Column of the power reading: by position (powerIdx of ncols) in
	// ROCm 5.x, which survives collapsed whitespace; by rune column
	// (powerRune) in 6.x, whose cells hold spaces ("NPS1, SPX"). -1: none.
	powerIdx, powerRune, ncols int
	rows                       int
	prev                       *DeviceInfo // the GPU of the last row
}

// concise parses the concise table at or after the next line.
func (p *textParser) concise(sec sectionInfo) error {
	tb, err := p.conciseHeader(sec)
	if err != nil {
		return err
	}
	for line, ok := p.next(); ok; line, ok = p.next() {
		t := strings.TrimSpace(line)
		if title, ok := bannerTitle(t); ok {
			switch {
			case title != "":
				p.lr.Unread() // the next section's
			case tb.rows == 0 && !tb.gen1:
				continue // the rule under a two-row header
			}
			return nil // or the rule under the table
		}
		if t == "" || logLine(t) {
			continue
		}
		if line[0] == ' ' || line[0] == '\t' {
			if tb.rows > 0 && tb.prev != nil && !tb.gen1 && tb.prev.Name == "" {
				tb.prev.Name = t // the second row of a ROCm 6.0/6.1 entry
			}
			continue
		}
		if err := p.conciseRow(tb, line); err != nil {
			return err
		}
	}
	if tb.rows == 0 {
		return topology.NewParseError(sec.source, p.lastFull, 0, topology.ErrTruncated, "concise table has no rows")
	}
	return nil
}

// conciseHeader reads the concise table's header and finds its power column.
func (p *textParser) conciseHeader(sec sectionInfo) (*conciseTable, error) {
	line, ok := p.next()
	for ok && (strings.TrimSpace(line) == "" || logLine(strings.TrimSpace(line))) {
		line, ok = p.next()
	}
	if !ok {
		return nil, p.errHere(sec.source, 0, topology.ErrTruncated, "no table after the section title")
	}
	head := fields(line)
	tb := &conciseTable{sec: sec, gen1: head[0].S == "GPU", powerIdx: -1, powerRune: -1}
	if !tb.gen1 && head[0].S != "Device" {
		return nil, p.errHere(sec.source, head[0].Col, topology.ErrSyntax, "concise header starts with %q, not GPU or Device", head[0].S)
	}
	for _, tk := range head {
		if strings.HasPrefix(tk.S, "(") {
			continue // "Temp (DieEdge)" is one column
		}
		if tk.S == "AvgPwr" || tk.S == "Power" {
			tb.powerIdx, tb.powerRune = tb.ncols, runeCol(line, tk)
		}
		tb.ncols++
	}
	return tb, nil
}

// conciseRow reads one GPU's row; power and power cap tell a second die.
func (p *textParser) conciseRow(tb *conciseTable, line string) error {
	src := tb.sec.source
	toks := fields(line)
	idx, err := parseIndex(toks[0].S)
	if err != nil {
		return p.errHere(src, 0, topology.ErrSyntax, "concise row %q does not start with a GPU index", toks[0].S)
	}
	if len(toks) < 4 {
		return p.errHere(src, len(line), topology.ErrSyntax, "concise row has %d fields", len(toks))
	}
	n := len(toks)
	util, vram, capTok := toks[n-1], toks[n-2], toks[n-3]
	d := p.r.device(idx)
	d.InConcise = true
	p.r.list(tb.sec.title, idx)
	if !unknownValue(util.S) {
		if d.UtilPercent, err = parsePercent(util.S); err != nil {
			return p.errHere(src, util.Col, err, "")
		}
	}
	if !unknownValue(vram.S) {
		if d.MemUsedPct, err = parsePercent(vram.S); err != nil {
			return p.errHere(src, vram.Col, err, "")
		}
	}
	pwrCap := -1.0
	if !unknownValue(capTok.S) {
		pwrCap, err = strconv.ParseFloat(strings.TrimSuffix(capTok.S, "W"), 64)
		if err != nil || pwrCap < 0 {
			return p.errHere(src, capTok.Col, topology.ErrBadNumber, "power cap %q", capTok.S)
		}
	}
	d.SecondDie = tb.rows > 0 && tb.power(line, toks) == "N/A" && pwrCap == 0
	tb.prev = d
	tb.rows++
	return nil
}

// power returns the power reading of a row, or "".
func (tb *conciseTable) power(line string, toks []topology.Field) string {
	power := ""
	for i, tk := range toks {
		byPos := tb.gen1 && i == tb.powerIdx && len(toks) == tb.ncols
		if byPos || !tb.gen1 && tb.powerRune >= 0 && runeCol(line, tk) == tb.powerRune {
			power = tk.S
		}
	}
	return power
}
