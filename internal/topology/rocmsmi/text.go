package rocmsmi

import (
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/amdrun/amdrun/internal/topology"
)

// sectionKind says how the lines under a banner are parsed.
type sectionKind int

const (
	kindOther   sectionKind = iota // key: value lines only
	kindHeader                     // the "ROCm System Management Interface" banner
	kindWeight                     // matrix of ints
	kindHops                       // matrix of ints
	kindType                       // matrix of link types
	kindAccess                     // matrix of True/False
	kindBW                         // matrix of min-max
	kindConcise                    // the concise table
	kindKnownKV                    // a known key: value section
)

type sectionInfo struct {
	kind sectionKind
	// flag is what Report.Sections records ("--showtopo").
	flag string
	// source names the section in errors ("rocm-smi --showtopo").
	source string
	// title is the banner's title, lower case ("weight between two gpus");
	// parse sets it.
	title string
}

// sections maps a banner title (lower case, single spaces) to its section.
var sections = map[string]sectionInfo{
	"rocm system management interface":    {kind: kindHeader},
	"end of rocm smi log":                 {kind: kindHeader},
	"weight between two gpus":             {kind: kindWeight, flag: "--showtopo", source: "rocm-smi --showtopo"},
	"hops between two gpus":               {kind: kindHops, flag: "--showtopo", source: "rocm-smi --showtopo"},
	"link type between two gpus":          {kind: kindType, flag: "--showtopo", source: "rocm-smi --showtopo"},
	"link accessibility between two gpus": {kind: kindAccess, flag: "--showtopoaccess", source: "rocm-smi --showtopoaccess"},
	"numa nodes":                          {kind: kindKnownKV, flag: "--showtoponuma", source: "rocm-smi --showtoponuma"},
	"bandwidth":                           {kind: kindBW, flag: "--shownodesbw", source: "rocm-smi --shownodesbw"},
	"concise info":                        {kind: kindConcise, flag: "concise", source: "rocm-smi concise table"},
	"% time gpu is busy":                  {kind: kindKnownKV, flag: "--showuse", source: "rocm-smi --showuse"},
	"current memory use":                  {kind: kindKnownKV, flag: "--showmemuse", source: "rocm-smi --showmemuse"},
	"memory usage (bytes)":                {kind: kindKnownKV, flag: "--showmeminfo", source: "rocm-smi --showmeminfo"},
	"pci bus id":                          {kind: kindKnownKV, flag: "--showbus", source: "rocm-smi --showbus"},
	"unique id":                           {kind: kindKnownKV, flag: "--showuniqueid", source: "rocm-smi --showuniqueid"},
	"product info":                        {kind: kindKnownKV, flag: "--showproductname", source: "rocm-smi --showproductname"},
	"version of system component":         {kind: kindKnownKV, flag: "--showdriverversion", source: "rocm-smi --showdriverversion"},
}

var (
	// kvLine matches "GPU[0]\t\t: key: value" and "GPU 0          : key: value".
	kvLine = regexp.MustCompile(`^GPU(?:\s*\[\s*(\d+)\s*\]|\s+(\d+))\s*:`)
	// gpuLabel matches a matrix row or column label.
	gpuLabel = regexp.MustCompile(`^GPU(\d+)$`)
)

// fields splits line at runs of Unicode white space (rocm-smi's tables
// are padded with spaces, tabs and, in some captures, other spaces),
// keeping each token's byte column.
func fields(line string) []topology.Field {
	var out []topology.Field
	start := -1
	for i, c := range line {
		if unicode.IsSpace(c) {
			if start >= 0 {
				out = append(out, topology.Field{S: line[start:i], Col: start})
				start = -1
			}
		} else if start < 0 {
			start = i
		}
	}
	if start >= 0 {
		out = append(out, topology.Field{S: line[start:], Col: start})
	}
	return out
}

// runeCol is the rune offset of tk in line, for aligning columns whose
// cells hold multi-byte characters (°C).
func runeCol(line string, tk topology.Field) int {
	return utf8.RuneCountInString(line[:tk.Col])
}

// bannerTitle reports whether t (a trimmed line) is a "==== Title ===="
// banner, and its normalised title ("" for a plain rule).
func bannerTitle(t string) (string, bool) {
	if !strings.HasPrefix(t, "==") {
		return "", false
	}
	title := strings.Trim(t, "= \t")
	return strings.ToLower(strings.Join(strings.Fields(title), " ")), true
}

// logLine reports lines Python's logging or rocm-smi itself interleaves
// with the tables ("WARNING: AMD GPU device(s) is/are in a low-power state").
func logLine(t string) bool {
	for _, p := range []string{"WARNING:", "ERROR:", "INFO:", "DEBUG:", "CRITICAL:"} {
		if strings.HasPrefix(t, p) {
			return true
		}
	}
	return false
}

type textParser struct {
	r     *Report
	lines []string
	// last is the index of the last non-blank line.
	last int
	seen bool
	// Oddities met while parsing, reported once per kind (see odd).
	toolLines []string // tool error lines inside a section
	retitled  []string // sections whose matrix holds link types
	xxxx      []string // GPU pairs whose cells read XXXX
}

func (p *textParser) errAt(src string, i, col int, err error) error {
	return topology.NewParseError(src, i+1, col, err, "")
}

// ParseText parses the text output of one or more rocm-smi runs: any mix
// of the sections printed by --showtopo (Weight, Hops, Link Type, Numa
// Nodes), --shownodesbw, --showtoponuma, --showtopoaccess, the concise
// table (plain rocm-smi, all three header generations), --showuse,
// --showmemuse, --showmeminfo vram, --showbus, --showuniqueid,
// --showproductname, --showallinfo and --version, in any order. Banners
// of any width, WARNING lines, tabs or spaces, trailing spaces and both
// GPU[0] and GPU 0 labels are accepted; sections it does not know are
// skipped.
//
// Broken-but-real output is read where it can be (rocm-smi on MI300 in a
// partition mode, rocm_smi_lib 6.1.0 changelog): tool error lines inside
// a section are skipped, a matrix is recognised by its content (link
// types under the "Weight between two GPUs" title are read as link
// types), and XXXX cells (unreadable) leave the pair unknown, so the
// model assumes it talks through the host and marks it assumed. Each
// kind of oddity becomes one note (Report.Notes), not one per line.
//
// Malformed input is a *topology.ParseError naming the section and line:
// a matrix whose rows and columns disagree (topology.ErrNotSquare), a
// non-numeric cell (ErrBadNumber), an unknown link type
// (ErrUnknownLinkType), a Weight or Hops matrix whose diagonal is not 0
// or that is not symmetric (ErrInconsistent), sections of one output
// listing different GPUs (ErrInconsistent, Line 0), a table cut off by
// the end of input (ErrTruncated), empty input (topology.ErrEmpty) or
// input with no rocm-smi section at all (ErrWrongTool, Line 0). Whether
// the output ended with its "End of ROCm SMI Log" banner is
// Report.Ended; Discover refuses one that did not.
func ParseText(rd io.Reader) (*Report, error) {
	lines, err := topology.ReadLines(rd, Source)
	if err != nil {
		return nil, err
	}
	for i, l := range lines {
		if !utf8.ValidString(l) {
			l = strings.ToValidUTF8(l, "\uFFFD")
		}
		lines[i] = strings.TrimRightFunc(l, unicode.IsSpace)
	}
	p := &textParser{r: NewReport(), lines: lines, last: -1}
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.TrimSpace(lines[i]) != "" {
			p.last = i
			break
		}
	}
	if p.last < 0 {
		return nil, topology.NewParseError(Source, 0, 0, topology.ErrEmpty, "")
	}
	if err := p.parse(); err != nil {
		return nil, err
	}
	if !p.seen {
		return nil, topology.NewParseError(Source, 0, 0, topology.ErrWrongTool, "no rocm-smi section found")
	}
	if err := p.r.listsAgree(); err != nil {
		return nil, topology.NewParseError(Source, 0, 0, err, "")
	}
	p.odd()
	return p.r, nil
}

// odd turns the oddities met into one note per kind.
func (p *textParser) odd() {
	if len(p.toolLines) > 0 {
		p.r.note("rocm-smi: skipped %d tool error line(s) inside its tables (first: %q)", len(p.toolLines), p.toolLines[0])
	}
	if len(p.retitled) > 0 {
		p.r.note("rocm-smi: the %s section holds link types, not numbers (rocm-smi on a partitioned MI300); read as link types", strings.Join(p.retitled, ", "))
	}
	if len(p.xxxx) > 0 {
		p.r.note("rocm-smi: %d GPU pair(s) read XXXX (unreadable): %s; their links are unknown and assumed through the host (marked * in amdrun topo)", len(p.xxxx), clipList(p.xxxx, 8))
	}
}

// clipList joins the first n items of s, saying how many more there are.
func clipList(s []string, n int) string {
	if len(s) <= n {
		return strings.Join(s, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(s[:n], ", "), len(s)-n)
}

func (p *textParser) parse() error {
	cur := sectionInfo{kind: kindOther, source: Source}
	for i := 0; i < len(p.lines); {
		line := p.lines[i]
		t := strings.TrimSpace(line)
		if title, ok := bannerTitle(t); ok {
			i++
			if title == "" {
				cur = sectionInfo{kind: kindOther, source: Source}
				continue
			}
			if title == "end of rocm smi log" {
				p.r.Ended = true
			}
			info, known := sections[title]
			if !known {
				cur = sectionInfo{kind: kindOther, source: Source}
				continue
			}
			info.title = title
			p.seen = true
			if info.flag != "" {
				p.r.addSection(info.flag)
			}
			cur = info
			var err error
			switch info.kind {
			case kindWeight, kindHops, kindType, kindAccess, kindBW:
				i, err = p.matrix(i, info)
				cur = sectionInfo{kind: kindOther, source: Source}
			case kindConcise:
				i, err = p.concise(i, info)
				cur = sectionInfo{kind: kindOther, source: Source}
			}
			if err != nil {
				return err
			}
			continue
		}
		if err := p.plainLine(i, t, cur); err != nil {
			return err
		}
		i++
	}
	return nil
}

// plainLine handles a line outside tables: GPU key/value lines, the
// driver and rocm-smi version lines; anything else is skipped.
func (p *textParser) plainLine(i int, t string, cur sectionInfo) error {
	line := p.lines[i]
	if m := kvLine.FindStringSubmatchIndex(line); m != nil {
		ns, ne := m[2], m[3]
		if ns < 0 {
			ns, ne = m[4], m[5]
		}
		num := line[ns:ne]
		if cur.kind == kindKnownKV {
			if idx, err := parseIndex(num); err == nil {
				p.r.list(cur.title, idx)
			}
		}
		rest := line[m[1]:]
		k := keyEnd(rest)
		if k < 0 {
			return nil // "GPU[0] : Not supported" and other free text
		}
		key, value := rest[:k], rest[k+1:]
		known := isKnownKey(key)
		if !known {
			return nil
		}
		idx, err := parseIndex(num)
		if err != nil {
			return p.errAt(cur.source, i, ns, err)
		}
		p.seen = true
		vcol := m[1] + k + 1 + (len(value) - len(strings.TrimLeftFunc(value, unicode.IsSpace)))
		if err := applyKey(p.r.device(idx), key, value); err != nil {
			return p.errAt(cur.source, i, vcol, err)
		}
		return nil
	}
	lower := strings.ToLower(t)
	if j := strings.Index(lower, "rocm-smi version:"); j >= 0 {
		v := strings.TrimSpace(t[j+len("rocm-smi version:"):])
		if f := strings.FieldsFunc(v, func(c rune) bool { return unicode.IsSpace(c) || c == '|' }); len(f) > 0 {
			p.r.Version = f[0]
			p.seen = true
		}
		return nil
	}
	if strings.HasPrefix(lower, "driver version:") {
		p.r.DriverVersion = strings.TrimSpace(t[len("driver version:"):])
	}
	return nil
}

// keyEnd returns the index of the colon ending the key in "key: value"
// (a colon followed by white space or the end), or -1.
func keyEnd(s string) int {
	for i := 0; i < len(s); i++ {
		if s[i] == ':' && (i+1 == len(s) || s[i+1] == ' ' || s[i+1] == '\t') {
			if strings.TrimSpace(s[:i]) == "" {
				return -1
			}
			return i
		}
	}
	return -1
}

func isKnownKey(k string) bool {
	switch strings.ToLower(strings.TrimSpace(k)) {
	case "(topology) numa node", "(topology) numa affinity", "gpu use (%)",
		"gpu memory allocated (vram%)", "gpu memory use (%)", "vram total memory (b)",
		"vram total used memory (b)", "pci bus", "unique id", "card series", "device name":
		return true
	}
	return false
}

// cell is one parsed matrix cell.
type cell struct {
	ok   bool // the cell holds a value (not N/A)
	a, b int64
	s    string
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
		switch strings.ToLower(s) {
		case "true", "false":
			return cell{ok: true, s: strings.ToLower(s)}, nil
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
		return cell{ok: true, a: a, b: b}, nil
	}
	return cell{}, nil
}

// matrix parses a GPU x GPU table whose column header is at or after line
// i; it returns the index of the first line after the table. Lines
// before the header that are not one (tool error lines) are skipped and
// noted; a banner before any header means the section has no table.
func (p *textParser) matrix(i int, sec sectionInfo) (int, error) {
	for ; i < len(p.lines); i++ {
		t := strings.TrimSpace(p.lines[i])
		if t == "" {
			continue
		}
		if _, banner := bannerTitle(t); banner {
			return i, nil // nothing readable in this section
		}
		if gpuLabel.MatchString(fields(t)[0].S) {
			break
		}
		if !logLine(t) || strings.HasPrefix(t, "ERROR:") {
			p.toolLines = append(p.toolLines, t)
		}
	}
	if i >= len(p.lines) {
		return i, p.errAt(sec.source, len(p.lines)-1, 0, fmt.Errorf("%w: no table after the section title", topology.ErrTruncated))
	}
	cols, err := p.matrixHeader(i, sec)
	if err != nil {
		return i, err
	}
	n := len(cols)
	rows := make([][]topology.Field, n)
	rowLine := make([]int, n)
	for r := 0; r < n; r++ {
		i++
		for i < len(p.lines) && logLine(strings.TrimSpace(p.lines[i])) {
			i++
		}
		if i > p.last {
			return i, p.errAt(sec.source, max(p.last, 0), 0, fmt.Errorf("%w: %d of %d rows", topology.ErrTruncated, r, n))
		}
		toks := fields(p.lines[i])
		if len(toks) == 0 || !gpuLabel.MatchString(toks[0].S) {
			return i, p.errAt(sec.source, i, 0, fmt.Errorf("%w: %d rows for %d columns", topology.ErrNotSquare, r, n))
		}
		if want := fmt.Sprintf("GPU%d", cols[r]); toks[0].S != want {
			return i, p.errAt(sec.source, i, 0, fmt.Errorf("%w: row %s where %s expected", topology.ErrNotSquare, toks[0].S, want))
		}
		if len(toks)-1 != n {
			col := len(p.lines[i])
			if len(toks)-1 > n {
				col = toks[n+1].Col
			}
			return i, p.errAt(sec.source, i, col, fmt.Errorf("%w: %d cells in row %s for %d columns", topology.ErrNotSquare, len(toks)-1, toks[0].S, n))
		}
		rows[r], rowLine[r] = toks[1:], i
	}
	i++
	for j := i; j < len(p.lines); j++ {
		t := strings.TrimSpace(p.lines[j])
		if t == "" || logLine(t) {
			continue
		}
		if toks := fields(t); gpuLabel.MatchString(toks[0].S) {
			return j, p.errAt(sec.source, j, 0, fmt.Errorf("%w: more rows than the %d columns", topology.ErrNotSquare, n))
		}
		break
	}
	if (sec.kind == kindWeight || sec.kind == kindHops) && holdsLinkTypes(rows) {
		// rocm-smi on a partitioned MI300 prints link types under the
		// Weight title (rocm_smi_lib 6.1.0 changelog, known issue 3).
		p.retitled = append(p.retitled, fmt.Sprintf("%q", sec.title))
		sec.kind = kindType
	}
	grid := make([]cell, n*n)
	for r := 0; r < n; r++ {
		for c, tk := range rows[r] {
			v, err := parseCell(sec.kind, tk.S, c == r)
			if err != nil {
				return i, p.errAt(sec.source, rowLine[r], tk.Col, err)
			}
			if tk.S == "XXXX" && r < c {
				p.xxxx = append(p.xxxx, fmt.Sprintf("GPU%d-GPU%d", cols[r], cols[c]))
			}
			grid[r*n+c] = v
		}
	}
	if sec.kind == kindWeight || sec.kind == kindHops {
		if err := p.checkSymmetric(sec, cols, rows, rowLine, grid); err != nil {
			return i, err
		}
	}
	p.r.list(sec.title, cols...)
	p.commit(sec, cols, grid)
	return i, nil
}

// matrixHeader reads the column header at line i: GPUn labels only.
func (p *textParser) matrixHeader(i int, sec sectionInfo) ([]int, error) {
	head := fields(p.lines[i])
	if len(head) > maxDevices {
		return nil, p.errAt(sec.source, i, head[maxDevices].Col, fmt.Errorf("%w: more than %d columns", topology.ErrSyntax, maxDevices))
	}
	cols := make([]int, len(head))
	seenCol := map[int]bool{}
	for c, tk := range head {
		m := gpuLabel.FindStringSubmatch(tk.S)
		if m == nil {
			return nil, p.errAt(sec.source, i, tk.Col, fmt.Errorf("%w: column header %q is not GPUn", topology.ErrSyntax, tk.S))
		}
		n, err := parseIndex(m[1])
		if err != nil {
			return nil, p.errAt(sec.source, i, tk.Col, err)
		}
		if seenCol[n] {
			return nil, p.errAt(sec.source, i, tk.Col, fmt.Errorf("%w: column %s twice", topology.ErrSyntax, tk.S))
		}
		seenCol[n] = true
		cols[c] = n
	}
	return cols, nil
}

// holdsLinkTypes says whether a matrix's cells name link types.
func holdsLinkTypes(rows [][]topology.Field) bool {
	for r, row := range rows {
		for c, tk := range row {
			if u := strings.ToUpper(tk.S); c != r && (u == "XGMI" || u == "PCIE") {
				return true
			}
		}
	}
	return false
}

// checkSymmetric refuses a Weight or Hops matrix whose diagonal is not 0
// or whose two halves disagree: a row out of place would otherwise turn
// a pair into another link silently.
func (p *textParser) checkSymmetric(sec sectionInfo, cols []int, rows [][]topology.Field, rowLine []int, grid []cell) error {
	n := len(cols)
	what := "weight"
	if sec.kind == kindHops {
		what = "hops"
	}
	for r := 0; r < n; r++ {
		if d := grid[r*n+r]; d.ok && d.a != 0 {
			return p.errAt(sec.source, rowLine[r], rows[r][r].Col, fmt.Errorf("%w: GPU%d's %s to itself is %d, not 0; a row or column is out of place", topology.ErrInconsistent, cols[r], what, d.a))
		}
		for c := 0; c < r; c++ {
			lo, up := grid[r*n+c], grid[c*n+r]
			if lo.ok && up.ok && lo.a != up.a {
				return p.errAt(sec.source, rowLine[r], rows[r][c].Col, fmt.Errorf("%w: GPU%d-GPU%d %s is %d but GPU%d-GPU%d is %d; a row or column is out of place",
					topology.ErrInconsistent, cols[r], cols[c], what, lo.a, cols[c], cols[r], up.a))
			}
		}
	}
	return nil
}

// commit stores a parsed matrix, reading the upper triangle and noting
// where the lower one disagrees.
func (p *textParser) commit(sec sectionInfo, cols []int, grid []cell) {
	n := len(cols)
	for a := 0; a < n; a++ {
		for b := a + 1; b < n; b++ {
			up, lo := grid[a*n+b], grid[b*n+a]
			v := up
			if !up.ok {
				v = lo
			}
			if up.ok && lo.ok && up != lo {
				p.r.note("%s: GPU%d-GPU%d reads %s but GPU%d-GPU%d reads %s; using the first",
					sec.source, cols[a], cols[b], cellString(sec.kind, up), cols[b], cols[a], cellString(sec.kind, lo))
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

func cellString(kind sectionKind, c cell) string {
	switch kind {
	case kindBW:
		return fmt.Sprintf("%d-%d", c.a, c.b)
	case kindType, kindAccess:
		return c.s
	}
	return strconv.FormatInt(c.a, 10)
}

// concise parses the concise table (plain rocm-smi) whose header is at or
// after line i, and returns the index of the first line after it.
func (p *textParser) concise(i int, sec sectionInfo) (int, error) {
	for i < len(p.lines) && (strings.TrimSpace(p.lines[i]) == "" || logLine(strings.TrimSpace(p.lines[i]))) {
		i++
	}
	if i >= len(p.lines) {
		return i, p.errAt(sec.source, len(p.lines)-1, 0, fmt.Errorf("%w: no table after the section title", topology.ErrTruncated))
	}
	head := fields(p.lines[i])
	gen1 := head[0].S == "GPU"
	if !gen1 && head[0].S != "Device" {
		return i, p.errAt(sec.source, i, head[0].Col, fmt.Errorf("%w: concise header starts with %q, not GPU or Device", topology.ErrSyntax, head[0].S))
	}
	// Column of the power reading: by position among the header's
	// columns in the single-token ROCm 5.x layout (which survives
	// whitespace being collapsed), by alignment in the 6.x layouts whose
	// cells hold spaces ("[0x74a1 : 0x00]", "NPS1, SPX").
	powerIdx, powerRune, ncols := -1, -1, 0
	for _, tk := range head {
		if strings.HasPrefix(tk.S, "(") {
			continue // "Temp (DieEdge)" is one column
		}
		if tk.S == "AvgPwr" || tk.S == "Power" {
			powerIdx, powerRune = ncols, runeCol(p.lines[i], tk)
		}
		ncols++
	}
	i++
	rows := 0
	var prev *DeviceInfo
	for ; i < len(p.lines); i++ {
		line := p.lines[i]
		t := strings.TrimSpace(line)
		if title, ok := bannerTitle(t); ok {
			if title != "" {
				return i, nil
			}
			if rows == 0 && !gen1 {
				continue // the rule under a two-row header
			}
			return i + 1, nil
		}
		if t == "" || logLine(t) {
			continue
		}
		if line[0] == ' ' || line[0] == '\t' {
			if rows > 0 && prev != nil && !gen1 && prev.Name == "" {
				prev.Name = t // the second row of a ROCm 6.0/6.1 entry
			}
			continue
		}
		toks := fields(line)
		idx, err := parseIndex(toks[0].S)
		if err != nil {
			return i, p.errAt(sec.source, i, 0, fmt.Errorf("%w: concise row %q does not start with a GPU index", topology.ErrSyntax, toks[0].S))
		}
		if len(toks) < 4 {
			return i, p.errAt(sec.source, i, len(line), fmt.Errorf("%w: concise row has %d fields", topology.ErrSyntax, len(toks)))
		}
		n := len(toks)
		util, vram, capTok := toks[n-1], toks[n-2], toks[n-3]
		d := p.r.device(idx)
		d.InConcise = true
		p.r.list(sec.title, idx)
		if !unknownValue(util.S) {
			if d.UtilPercent, err = parsePercent(util.S); err != nil {
				return i, p.errAt(sec.source, i, util.Col, err)
			}
		}
		if !unknownValue(vram.S) {
			if d.MemUsedPct, err = parsePercent(vram.S); err != nil {
				return i, p.errAt(sec.source, i, vram.Col, err)
			}
		}
		pwrCap := -1.0
		if !unknownValue(capTok.S) {
			pwrCap, err = strconv.ParseFloat(strings.TrimSuffix(capTok.S, "W"), 64)
			if err != nil || pwrCap < 0 {
				return i, p.errAt(sec.source, i, capTok.Col, fmt.Errorf("%w: power cap %q", topology.ErrBadNumber, capTok.S))
			}
		}
		power := ""
		if gen1 && powerIdx >= 0 && n == ncols {
			power = toks[powerIdx].S
		} else if !gen1 && powerRune >= 0 {
			for _, tk := range toks {
				if runeCol(line, tk) == powerRune {
					power = tk.S
				}
			}
		}
		d.SecondDie = rows > 0 && power == "N/A" && pwrCap == 0
		prev = d
		rows++
	}
	if rows == 0 {
		return i, p.errAt(sec.source, max(p.last, 0), 0, fmt.Errorf("%w: concise table has no rows", topology.ErrTruncated))
	}
	return i, nil
}
