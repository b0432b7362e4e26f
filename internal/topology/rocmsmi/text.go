package rocmsmi

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
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
	kind   sectionKind
	source string // the section in errors ("rocm-smi --showtopo")
	title  string // the banner's, lower case ("weight between two gpus")
}

// sections maps a banner title (lower case, single spaces) to its section.
var sections = map[string]sectionInfo{
	"rocm system management interface":    {kind: kindHeader},
	"end of rocm smi log":                 {kind: kindHeader},
	"weight between two gpus":             {kind: kindWeight, source: "rocm-smi --showtopo"},
	"hops between two gpus":               {kind: kindHops, source: "rocm-smi --showtopo"},
	"link type between two gpus":          {kind: kindType, source: "rocm-smi --showtopo"},
	"link accessibility between two gpus": {kind: kindAccess, source: "rocm-smi --showtopoaccess"},
	"numa nodes":                          {kind: kindKnownKV, source: "rocm-smi --showtoponuma"},
	"bandwidth":                           {kind: kindBW, source: "rocm-smi --shownodesbw"},
	"concise info":                        {kind: kindConcise, source: "rocm-smi concise table"},
	"% time gpu is busy":                  {kind: kindKnownKV, source: "rocm-smi --showuse"},
	"current memory use":                  {kind: kindKnownKV, source: "rocm-smi --showmemuse"},
	"memory usage (bytes)":                {kind: kindKnownKV, source: "rocm-smi --showmeminfo"},
	"pci bus id":                          {kind: kindKnownKV, source: "rocm-smi --showbus"},
	"unique id":                           {kind: kindKnownKV, source: "rocm-smi --showuniqueid"},
	"product info":                        {kind: kindKnownKV, source: "rocm-smi --showproductname"},
	"version of system component":         {kind: kindKnownKV, source: "rocm-smi --showdriverversion"},
}

// sectionTitles are the keys of sections, sorted, for stable notes.
var sectionTitles = slices.Sorted(maps.Keys(sections))

var (
	// kvLine matches "GPU[0]\t\t: key: value" and "GPU 0          : key: value".
	kvLine = topology.LazyRegexp(`^GPU(?:\s*\[\s*(\d+)\s*\]|\s+(\d+))\s*:`)
	// gpuLabel matches a matrix row or column label.
	gpuLabel = topology.LazyRegexp(`^GPU(\d+)$`)
	// ansiCode matches a terminal escape sequence (CSI, or a lone ESC).
	ansiCode = topology.LazyRegexp("\x1b(?:\\[[0-9;?]*[ -/]*[@-~])?")
)

// fields splits line at runs of any Unicode white space, as some captures pad.
func fields(line string) []topology.Field { return topology.SplitFieldsFunc(line, unicode.IsSpace) }

// runeCol is the rune offset of tk in line (cells can hold °C).
func runeCol(line string, tk topology.Field) int {
	return utf8.RuneCountInString(line[:tk.Col])
}

// bannerTitle reports a "==== Title ====" banner and its normalised title.
func bannerTitle(t string) (string, bool) {
	if !strings.HasPrefix(t, "==") {
		return "", false
	}
	title := strings.Trim(t, "= \t")
	return strings.ToLower(strings.Join(strings.Fields(title), " ")), true
}

// logLine reports a log line among the tables ("WARNING: AMD GPU device(s) ...").
func logLine(t string) bool {
	return slices.ContainsFunc([]string{"WARNING:", "ERROR:", "INFO:", "DEBUG:", "CRITICAL:"}, func(p string) bool { return strings.HasPrefix(t, p) })
}

// textParser reads rocm-smi's text one line at a time: parse handles the
// lines outside tables and hands each table to matrix or concise, which
// Unread the line after it.
type textParser struct {
	r        *Report
	lr       *topology.LineReader
	lastFull int  // the last line read that is not blank (0: none yet)
	seen     bool // a rocm-smi section or key was read
	// Oddities met while parsing, reported once per kind (see odd).
	toolLines []string // tool error lines inside a section
	retitled  []string // sections whose matrix holds link types
	xxxx      []string // GPU pairs whose cells read XXXX
	escaped   []int    // lines that held terminal escape codes
}

// otherSection is where lines outside any known section belong.
var otherSection = sectionInfo{kind: kindOther, source: Source}

// errHere is a *topology.ParseError at the line just read and col.
func (p *textParser) errHere(source string, col int, err error, format string, args ...any) error {
	return topology.NewParseError(source, p.lr.Line(), col, err, format, args...)
}

// next reads the next line, made valid UTF-8 and right-trimmed; ok is
// false at the end of the input or a read error (ParseText reports it).
func (p *textParser) next() (line string, ok bool) {
	if !p.lr.Next() {
		return "", false
	}
	line = strings.ToValidUTF8(p.lr.Text(), "\uFFFD")
	if strings.ContainsRune(line, '\x1b') {
		// rocm-smi run through a pty, or a capture pasted from one.
		line = ansiCode().ReplaceAllString(line, "")
		p.escaped = append(p.escaped, p.lr.Line())
	}
	line = strings.TrimRightFunc(line, unicode.IsSpace)
	if line != "" {
		p.lastFull = p.lr.Line()
	}
	return line, true
}

// ParseText parses the text output of one or more rocm-smi runs: the
// sections of the sections table in any order; others are skipped. Damaged
// titles (issue 24), a title with no table, a table with no title, tool
// error lines and XXXX cells (a partitioned MI300) are read where they can
// be or skipped, each kind with one note. Malformed input is a
// *topology.ParseError naming the section and line.
func ParseText(rd io.Reader) (*Report, error) {
	p := &textParser{r: NewReport(), lr: topology.NewLineReader(rd, Source)}
	err := p.parse()
	// A failing reader or an over-long line ended parse early: that first.
	if err = cmp.Or(p.lr.Err(), err); err != nil {
		return nil, err
	}
	if p.lastFull == 0 {
		return nil, topology.NewParseError(Source, 0, 0, topology.ErrEmpty, "")
	}
	if !p.seen {
		return nil, topology.NewParseError(Source, 0, 0, topology.ErrWrongTool, "no rocm-smi section found")
	}
	// Every section printed the same GPUs: a section cut short would
	// otherwise leave GPUs or their facts out silently.
	titles := slices.Sorted(maps.Keys(p.r.Listed))
	for _, t := range titles[min(1, len(titles)):] {
		if a, b := p.r.Listed[titles[0]], p.r.Listed[t]; !slices.Equal(a, b) {
			return nil, topology.NewParseError(Source, 0, 0, fmt.Errorf("%w: the %q section lists %s but the %q section lists %s; is the output cut short?",
				topology.ErrInconsistent, titles[0], gpuList(a), t, gpuList(b)), "")
		}
	}
	// One note per kind of oddity met.
	if len(p.toolLines) > 0 {
		p.r.note("rocm-smi: skipped %d tool error line(s) inside its tables (first: %q)", len(p.toolLines), p.toolLines[0])
	}
	if len(p.retitled) > 0 {
		p.r.note("rocm-smi: the %s section holds link types, not numbers (rocm-smi on a partitioned MI300); read as link types", strings.Join(p.retitled, ", "))
	}
	if len(p.escaped) > 0 {
		p.r.note("rocm-smi: %d line(s) held terminal escape codes (first: line %d); read without them", len(p.escaped), p.escaped[0])
	}
	if len(p.xxxx) > 0 {
		p.r.note("rocm-smi: %d GPU pair(s) read XXXX (unreadable): %s; their links are unknown and assumed through the host (marked * in amdrun topo)", len(p.xxxx), clipList(p.xxxx, 8))
	}
	return p.r, nil
}

// clipList joins the first n items of s, saying how many more there are.
func clipList(s []string, n int) string {
	if len(s) <= n {
		return strings.Join(s, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(s[:n], ", "), len(s)-n)
}

// parse reads the input: banners open sections, other lines go to plainLine.
func (p *textParser) parse() error {
	cur := otherSection
	for line, ok := p.next(); ok; line, ok = p.next() {
		t := strings.TrimSpace(line)
		var err error
		if title, banner := bannerTitle(t); banner {
			cur, err = p.section(title)
		} else {
			err = p.plainLine(line, t, cur)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// section opens a banner's section, reads its table if it has one, and
// returns the section the plain lines after it belong to.
func (p *textParser) section(title string) (sectionInfo, error) {
	if title == "end of rocm smi log" {
		p.r.Ended = true
	}
	info, known := sections[title]
	if !known {
		info, title = p.damagedTitle(title) // one amdrun does not read, or damaged
	}
	if info.kind == kindOther {
		return otherSection, nil
	}
	info.title = title
	p.seen = true
	switch info.kind {
	case kindWeight, kindHops, kindType, kindAccess, kindBW:
		return otherSection, p.matrix(info)
	case kindConcise:
		return otherSection, p.concise(info)
	}
	return info, nil
}

// squash drops a title's spaces, so "weightbetween two gpus" still matches.
func squash(title string) string { return strings.ReplaceAll(title, " ", "") }

// damagedTitle looks at an unknown banner title: a known title with its
// words run together is read as that section, with a note; two titles on
// one line or a known title inside other text are noted and skipped. Other
// sections are skipped without a word (--showallinfo prints dozens).
func (p *textParser) damagedTitle(title string) (info sectionInfo, known string) {
	line, sq := p.lr.Line(), squash(title)
	for _, t := range sectionTitles {
		if inf := sections[t]; squash(t) == sq {
			p.r.note("rocm-smi: line %d: section title %q is damaged; read as %q", line, title, t)
			return inf, t
		}
	}
	if strings.Contains(title, "=") {
		p.r.note("rocm-smi: line %d: banner %q holds more than one section title; its section is skipped", line, title)
		return otherSection, title
	}
	if i := slices.IndexFunc(sectionTitles, func(t string) bool { return strings.Contains(sq, squash(t)) }); i >= 0 {
		p.r.note("rocm-smi: line %d: section title %q holds %q and other text; its section is skipped", line, title, sectionTitles[i])
	}
	return otherSection, title
}

// plainLine reads GPU key/value lines and the version line outside tables.
func (p *textParser) plainLine(line, t string, cur sectionInfo) error {
	// A matrix's column header (GPUn labels only) outside a matrix section.
	if fs := fields(t); len(fs) > 0 && !slices.ContainsFunc(fs, func(f topology.Field) bool { return !gpuLabel().MatchString(f.S) }) {
		p.r.note("rocm-smi: line %d: a GPU table with no section title above it; skipped", p.lr.Line())
		return nil
	}
	if m := kvLine().FindStringSubmatchIndex(line); m != nil {
		g := 2 // "GPU[0]", else "GPU 0"
		if m[g] < 0 {
			g = 4
		}
		idx, idxErr := parseIndex(line[m[g]:m[g+1]])
		if cur.kind == kindKnownKV && idxErr == nil {
			p.r.list(cur.title, idx)
		}
		rest := line[m[1]:]
		k := keyEnd(rest)
		if k < 0 {
			return nil // "GPU[0] : Not supported" and other free text
		}
		set := keys[strings.ToLower(strings.TrimSpace(rest[:k]))]
		if set == nil {
			return nil
		}
		if idxErr != nil {
			return p.errHere(cur.source, m[g], idxErr, "")
		}
		p.seen = true
		d, value := p.r.device(idx), strings.TrimLeftFunc(rest[k+1:], unicode.IsSpace)
		if v := strings.TrimSpace(value); !unknownValue(v) {
			if err := set(d, v); err != nil {
				return p.errHere(cur.source, len(line)-len(value), err, "")
			}
		}
		return nil
	}
	if j := strings.Index(strings.ToLower(t), "rocm-smi version:"); j >= 0 {
		v := strings.TrimSpace(t[j+len("rocm-smi version:"):])
		if f := strings.FieldsFunc(v, func(c rune) bool { return unicode.IsSpace(c) || c == '|' }); len(f) > 0 {
			p.r.Version = f[0]
			p.seen = true
		}
	}
	return nil
}

// keyEnd returns the index of the colon ending the key in "key: value", or -1.
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

// unknownValue reports values rocm-smi prints when it has no answer.
func unknownValue(v string) bool {
	return slices.Contains([]string{"", "n/a", "na", "unknown", "not supported", "unsupported"}, strings.ToLower(strings.TrimSpace(v)))
}

// keys maps each key amdrun reads (lower case) to what records its known
// value, failing with a topology sentinel when it is malformed.
var keys = map[string]func(d *DeviceInfo, v string) error{
	"(topology) numa node":         func(d *DeviceInfo, v string) error { return store(&d.NUMANode, parseNUMA, v) },
	"(topology) numa affinity":     func(d *DeviceInfo, v string) error { return store(&d.NUMAAffinity, parseNUMA, v) },
	"gpu use (%)":                  func(d *DeviceInfo, v string) error { return store(&d.UtilPercent, parsePercent, v) },
	"gpu memory allocated (vram%)": func(d *DeviceInfo, v string) error { return store(&d.MemUsedPct, parsePercent, v) },
	"gpu memory use (%)":           func(d *DeviceInfo, v string) error { return store(&d.MemUsedPct, parsePercent, v) },
	"vram total memory (b)":        func(d *DeviceInfo, v string) error { return store(&d.MemTotalBytes, parseBytes, v) },
	"vram total used memory (b)":   func(d *DeviceInfo, v string) error { return store(&d.MemUsedBytes, parseBytes, v) },
	"pci bus":                      func(d *DeviceInfo, v string) error { d.PCIBus = strings.ToLower(v); return nil },
	"unique id":                    func(d *DeviceInfo, v string) error { d.UniqueID = v; return nil },
	"card series": func(d *DeviceInfo, v string) error {
		if !strings.HasPrefix(v, "0x") { // ROCm 4.x prints the vendor id (0x1002) here
			d.Name = v
		}
		return nil
	},
	"device name": func(*DeviceInfo, string) error { return nil }, // still marks rocm-smi's output
}

// store parses v into *dst; a malformed v leaves *dst as it was.
func store[T any](dst *T, parse func(string) (T, error), v string) error {
	x, err := parse(v)
	if err == nil {
		*dst = x
	}
	return err
}

// parseNUMA reads a NUMA node; -1 and 4294967295 (-1 as unsigned) are Unknown.
func parseNUMA(v string) (int, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: numa node %q", topology.ErrBadNumber, v)
	}
	switch {
	case n == -1 || n == 4294967295:
		return Unknown, nil
	case n < -1 || n > 65535:
		return 0, fmt.Errorf("%w: numa node %d out of range", topology.ErrBadNumber, n)
	}
	return int(n), nil
}

// parsePercent reads "12", "12%" or "12.5" in 0-100.
func parsePercent(v string) (float64, error) {
	f, err := strconv.ParseFloat(strings.TrimSuffix(v, "%"), 64)
	if err != nil || f < 0 || f > 100 || f != f {
		return 0, fmt.Errorf("%w: percentage %q", topology.ErrBadNumber, v)
	}
	return f, nil
}

func parseBytes(v string) (int64, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%w: byte count %q", topology.ErrBadNumber, v)
	}
	return n, nil
}

// parseIndex reads a GPU index within maxDevices.
func parseIndex(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%w: GPU index %q", topology.ErrBadNumber, s)
	}
	if n >= maxDevices {
		return 0, fmt.Errorf("%w: GPU index %d above %d", topology.ErrSyntax, n, maxDevices-1)
	}
	return n, nil
}

// conciseTable is a concise table's layout and the last row read.
type conciseTable struct {
	sec  sectionInfo
	gen1 bool // ROCm 5.x's header ("GPU"); later ones may take two rows per GPU
	// Column of the power reading: by position (powerIdx of ncols) in
	// ROCm 5.x, which survives collapsed whitespace; by rune column
	// (powerRune) in 6.x, whose cells hold spaces ("NPS1, SPX"). -1: none.
	powerIdx, powerRune, ncols int
	prev                       *DeviceInfo // the GPU of the last row, nil before the first
}

// concise parses the concise table at or after the next line.
func (p *textParser) concise(sec sectionInfo) error {
	// The header, and its power column.
	line, ok := p.next()
	for ok && (strings.TrimSpace(line) == "" || logLine(strings.TrimSpace(line))) {
		line, ok = p.next()
	}
	if !ok {
		return p.errHere(sec.source, 0, topology.ErrTruncated, "no table after the section title")
	}
	head := fields(line)
	tb := &conciseTable{sec: sec, gen1: head[0].S == "GPU", powerIdx: -1, powerRune: -1}
	if !tb.gen1 && head[0].S != "Device" {
		return p.errHere(sec.source, head[0].Col, topology.ErrSyntax, "concise header starts with %q, not GPU or Device", head[0].S)
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
	for line, ok := p.next(); ok; line, ok = p.next() {
		t := strings.TrimSpace(line)
		if title, ok := bannerTitle(t); ok {
			switch {
			case title != "":
				p.lr.Unread() // the next section's
			case tb.prev == nil && !tb.gen1:
				continue // the rule under a two-row header
			}
			return nil // or the rule under the table
		}
		if t == "" || logLine(t) {
			continue
		}
		if line[0] == ' ' || line[0] == '\t' {
			if tb.prev != nil && !tb.gen1 && tb.prev.Name == "" {
				tb.prev.Name = t // the second row of a ROCm 6.0/6.1 entry
			}
			continue
		}
		if err := p.conciseRow(tb, line); err != nil {
			return err
		}
	}
	if tb.prev == nil {
		return topology.NewParseError(sec.source, p.lastFull, 0, topology.ErrTruncated, "concise table has no rows")
	}
	return nil
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
	capTok, d := toks[n-3], p.r.device(idx)
	d.InConcise = true
	p.r.list(tb.sec.title, idx)
	for i, dst := range []*float64{&d.UtilPercent, &d.MemUsedPct} { // the last two columns
		if tk := toks[n-1-i]; !unknownValue(tk.S) {
			if *dst, err = parsePercent(tk.S); err != nil {
				return p.errHere(src, tk.Col, err, "")
			}
		}
	}
	pwrCap := -1.0
	if !unknownValue(capTok.S) {
		pwrCap, err = strconv.ParseFloat(strings.TrimSuffix(capTok.S, "W"), 64)
		if err != nil || pwrCap < 0 {
			return p.errHere(src, capTok.Col, topology.ErrBadNumber, "power cap %q", capTok.S)
		}
	}
	power := ""
	for i, tk := range toks {
		byPos := tb.gen1 && i == tb.powerIdx && len(toks) == tb.ncols
		if byPos || !tb.gen1 && tb.powerRune >= 0 && runeCol(line, tk) == tb.powerRune {
			power = tk.S
		}
	}
	d.SecondDie = tb.prev != nil && power == "N/A" && pwrCap == 0
	tb.prev = d
	return nil
}
