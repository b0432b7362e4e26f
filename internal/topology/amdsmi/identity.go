package amdsmi

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/amdrun/amdrun/internal/topology"
)

// GPU is one GPU, or one partition of a GPU, as amd-smi identifies it and
// reports its use. Fields a source does not give keep their unknown value.
type GPU struct {
	Index       int    // amd-smi's GPU index ("GPU: 0")
	BDF         string // the PCI address in lower case, "" if unknown
	UUID        string // "" if unknown
	Name        string // the marketing name ("AMD Instinct MI355X"), "" if unknown
	HIPID       int    // HIP's index of the device, which can differ from Index; -1 if unknown
	PartitionID int    // the partition within the GPU, 0 if none or unknown
	// MemUsedMiB and MemTotalMiB are VRAM use (amd-smi's "MB"); -1 if unknown.
	MemUsedMiB, MemTotalMiB int64
	Processes               int // processes using the GPU, -1 if unknown
}

// NewGPU returns a GPU with the given index and every other field unknown.
func NewGPU(index int) GPU {
	return GPU{Index: index, HIPID: -1, MemUsedMiB: -1, MemTotalMiB: -1, Processes: -1}
}

// merge fills the unknown fields of g from o.
func (g *GPU) merge(o GPU) {
	g.BDF = cmp.Or(g.BDF, o.BDF)
	g.UUID = cmp.Or(g.UUID, o.UUID)
	g.Name = cmp.Or(g.Name, o.Name)
	g.PartitionID = cmp.Or(g.PartitionID, o.PartitionID)
	fillNegative(&g.HIPID, o.HIPID)
	fillNegative(&g.MemUsedMiB, o.MemUsedMiB)
	fillNegative(&g.MemTotalMiB, o.MemTotalMiB)
	fillNegative(&g.Processes, o.Processes)
}

// fillNegative sets *dst to v when *dst is negative (unknown).
func fillNegative[T int | int64](dst *T, v T) {
	if *dst < 0 {
		*dst = v
	}
}

// keyName normalises "HIP-ID", "hip_id", "Partition ID" to "HIP_ID" etc.
func keyName(s string) string {
	return strings.NewReplacer("-", "_", " ", "_").Replace(strings.ToUpper(strings.TrimSpace(s)))
}

// setIdentity stores one identity key into g; unknown keys are ignored.
func setIdentity(g *GPU, key string, v any) error {
	setNum := func(dst *int) error {
		n, ok, err := jsonInt(v)
		if err == nil && (n < -1 || n > 1<<31-1) {
			err = fmt.Errorf("%w: %v", topology.ErrBadNumber, v)
		}
		if err == nil && ok && n >= 0 {
			*dst = int(n)
		}
		return err
	}
	switch keyName(key) {
	case "BDF":
		s := jsonString(v)
		b, ok := topology.NormalizePCI(s)
		if s != "" && !ok {
			return fmt.Errorf("%w: bdf %q", topology.ErrSyntax, s)
		}
		g.BDF = cmp.Or(b, g.BDF)
	case "UUID":
		g.UUID = strings.ToLower(jsonString(v))
	case "HIP_ID":
		return setNum(&g.HIPID)
	case "PARTITION_ID":
		return setNum(&g.PartitionID)
	case "OAM_ID", "NODE_ID": // not kept, but a bad one means misread columns
		return setNum(new(int))
	}
	return nil
}

// ParseListJSON parses `amd-smi list --json` ("gpu", "bdf", "uuid",
// "partition_id", newer "hip_id"); an empty list is ErrNoDevices.
func ParseListJSON(r io.Reader) ([]GPU, error) {
	const src = SourceListJSON
	objs, gpus, err := decodeGPUs(src, r)
	if err != nil {
		return nil, err
	}
	if len(objs) == 0 {
		return nil, topology.NewParseError(src, 0, 0, topology.ErrNoDevices, "")
	}
	out := make([]GPU, len(objs))
	for i, o := range objs {
		out[i] = NewGPU(gpus[i])
		for _, k := range slices.Sorted(maps.Keys(o)) { // a stable first error
			if err := setIdentity(&out[i], k, o[k]); err != nil {
				return nil, topology.NewParseError(src, 0, 0, fmt.Errorf("gpu %d: %s: %w", gpus[i], k, err), "")
			}
		}
	}
	return out, nil
}

// Summary is what the default `amd-smi` table (amd-smi 25 and later) shows.
type Summary struct {
	Version string // the banner's amd-smi version ("26.0.2+39589fda") or ""
	GPUs    []GPU  // in the table's order; Processes known with the Processes box
}

// boxCells splits a box-table line at '|' into its cells and their columns.
func boxCells(line string) []topology.Field {
	var out []topology.Field
	parts := strings.Split(line, "|")
	col := len(parts[0]) + 1
	for _, s := range parts[1:max(1, len(parts)-1)] {
		out = append(out, topology.Field{S: s, Col: col})
		col += len(s) + 1
	}
	return out
}

// cellFields splits a cell into fields with columns in the whole line.
func cellFields(c topology.Field) []topology.Field {
	fs := topology.SplitFields(c.S)
	for i := range fs {
		fs[i].Col += c.Col
	}
	return fs
}

// ParseDefault parses the box table `amd-smi` prints without arguments:
//
//	| BDF                        GPU-Name | Mem-Uti   Temp   UEC       Power-Usage |
//	| GPU  HIP-ID  OAM-ID  Partition-Mode | GFX-Uti    Fan               Mem-Usage |
//	|=====================================+========================================|
//	| 0000:0d:00.0    AMD Instinct MI355X | N/A        N/A   0          N/A/1400 W |
//	|   0       1       7        SPX/NPS1 | N/A        N/A           283/294896 MB |
//
// and the Processes box under it. The second header row names the columns
// of each GPU's second row. Input without GPU rows (an older amd-smi
// printing its help) gives ErrWrongTool.
func ParseDefault(r io.Reader) (*Summary, error) {
	p := &defaultParser{lr: topology.NewLineReader(r, SourceDefault), s: &Summary{}, procs: map[int]int{}}
	if err := p.lr.ForEach(p.line); err != nil {
		return nil, err
	}
	s := p.s
	if p.pending {
		return nil, p.lr.Errorf(0, topology.ErrTruncated, "GPU %s has no second row", s.GPUs[len(s.GPUs)-1].BDF)
	}
	if len(s.GPUs) == 0 {
		if !p.sawText {
			return nil, topology.NewParseError(p.lr.Source, 0, 0, topology.ErrEmpty, "")
		}
		return nil, topology.NewParseError(p.lr.Source, 0, 0, topology.ErrWrongTool, "no amd-smi GPU table")
	}
	if p.inProcs {
		for i := range s.GPUs {
			s.GPUs[i].Processes = p.procs[s.GPUs[i].Index]
		}
	}
	return s, nil
}

// defaultParser holds what ParseDefault has read so far.
type defaultParser struct {
	lr       *topology.LineReader
	s        *Summary
	idHeader []string    // names of the second row's first-cell columns
	pending  bool        // a BDF row was read, its second row is next
	inProcs  bool        // in the Processes box, so Processes is known
	procs    map[int]int // amd-smi GPU index -> processes listed
	sawText  bool
	boxWidth int // characters from the box's left edge to its right
}

func (p *defaultParser) line(line string) error {
	t := strings.TrimSpace(line)
	if t == "" {
		return nil
	}
	p.sawText = true
	if _, v, ok := strings.Cut(t, "AMD-SMI "); ok && p.s.Version == "" && len(strings.Fields(v)) > 0 {
		p.s.Version = strings.Fields(v)[0]
	}
	if len(t) > 1 && strings.ContainsRune("|+", rune(t[0])) && strings.ContainsRune("|+", rune(t[len(t)-1])) {
		// Every box line is as wide as the first: cells run together
		// ("283/196592MB") would otherwise be misread silently.
		if w := utf8.RuneCountInString(t); p.boxWidth == 0 {
			p.boxWidth = w
		} else if w != p.boxWidth {
			return p.lr.Errorf(0, topology.ErrSyntax, "box line %d characters wide, the box %d: cells run together or a line is cut", w, p.boxWidth)
		}
	}
	cs := boxCells(line)
	if len(cs) == 0 {
		return nil
	}
	first := cellFields(cs[0])
	switch {
	case strings.Contains(cs[0].S, "Processes:"):
		p.inProcs, p.pending = true, false
		return nil
	case len(first) == 0 || strings.HasPrefix(first[0].S, "=") || strings.HasPrefix(first[0].S, "-"):
		return nil // rules
	case p.inProcs: // a "GPU  PID  Process Name ..." row, or its header
		if len(first) >= 2 {
			g, err1 := strconv.Atoi(first[0].S)
			if _, err2 := strconv.Atoi(first[1].S); err1 == nil && err2 == nil && g >= 0 && g < 1<<20 {
				p.procs[g]++
			}
		}
		return nil
	case p.pending:
		p.pending = false
		return p.idRow(cs, first)
	case first[0].S == "GPU" && len(first) >= 2:
		p.idHeader = topology.Texts(first)
		return nil
	}
	bdf, ok := topology.NormalizePCI(first[0].S)
	if !ok {
		return nil // header rows
	}
	// A GPU's first row: "| 0000:0d:00.0    AMD Instinct MI355X |".
	if len(p.s.GPUs) >= MaxGPUs {
		return p.lr.Errorf(first[0].Col, topology.ErrSyntax, "more than %d GPUs", MaxGPUs)
	}
	g := NewGPU(len(p.s.GPUs))
	g.BDF, g.Name = bdf, strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(cs[0].S), first[0].S))
	if g.Name == "N/A" {
		g.Name = ""
	}
	p.s.GPUs, p.pending = append(p.s.GPUs, g), true
	return nil
}

// idRow reads a GPU's second row, whose first cell the second header row names.
func (p *defaultParser) idRow(cs []topology.Field, first []topology.Field) error {
	g := &p.s.GPUs[len(p.s.GPUs)-1]
	names := p.idHeader
	if len(names) == 0 {
		names = []string{"GPU", "HIP-ID", "OAM-ID", "Partition-Mode"}
	}
	if len(first) != len(names) {
		return p.lr.Errorf(cs[0].Col, topology.ErrSyntax, "%d fields under %d columns %s", len(first), len(names), strings.Join(names, " "))
	}
	for i, f := range first {
		if keyName(names[i]) != "GPU" {
			if err := setIdentity(g, names[i], f.S); err != nil {
				return p.lr.Errorf(f.Col, err, "")
			}
			continue
		}
		n, err := strconv.Atoi(f.S)
		if err != nil || n < 0 || n >= 1<<20 {
			return p.lr.Errorf(f.Col, topology.ErrBadNumber, "GPU %q", f.S)
		}
		g.Index = n
	}
	if len(cs) < 2 {
		return nil
	}
	// The first "used/total MB" of the second cell.
	fs := cellFields(cs[1])
	for i := 0; i+1 < len(fs); i++ {
		unit := strings.ToUpper(fs[i+1].S)
		a, b, cut := strings.Cut(fs[i].S, "/")
		if unit != "MB" && unit != "MIB" || !cut || a == "N/A" || b == "N/A" {
			continue
		}
		u, err1 := strconv.ParseInt(a, 10, 64)
		t, err2 := strconv.ParseInt(b, 10, 64)
		if err1 != nil || err2 != nil || u < 0 || t < 0 || u > 1<<40 || t > 1<<40 {
			return p.lr.Errorf(fs[i].Col, topology.ErrBadNumber, "memory usage")
		}
		g.MemUsedMiB, g.MemTotalMiB = u, t
		return nil
	}
	return nil
}

// ParseProcessJSON parses `amd-smi process --json` into the number of
// processes per amd-smi GPU index; ROCm 6.1-6.3 wrap each in "process_info".
func ParseProcessJSON(r io.Reader) (map[int]int, error) {
	const src = SourceProcessJSON
	objs, gpus, err := decodeGPUs(src, r)
	if err != nil {
		return nil, err
	}
	out := map[int]int{}
	for i, o := range objs {
		g := gpus[i]
		out[g] += 0
		var arr []any
		switch pl := o["process_list"].(type) {
		case []any:
			arr = pl
		case nil, string: // none, or a message saying none
		default:
			return nil, topology.NewParseError(src, 0, 0, topology.ErrSyntax, "gpu %d: process_list is not a list", g)
		}
		for _, e := range arr {
			p, isObj := e.(map[string]any) // else a bare message string
			info, wrapped := p["process_info"]
			if _, infoObj := info.(map[string]any); isObj && (!wrapped || infoObj) {
				out[g]++
			}
		}
	}
	return out, nil
}

// Memory is one GPU's VRAM use in MiB.
type Memory struct {
	UsedMiB, TotalMiB int64
}

// ParseMemUsageJSON parses `amd-smi metric --mem-usage --json`: VRAM use per GPU index.
func ParseMemUsageJSON(r io.Reader) (map[int]Memory, error) {
	const src = SourceMemUsageJSON
	objs, gpus, err := decodeGPUs(src, r)
	if err != nil {
		return nil, err
	}
	out := map[int]Memory{}
	for i, o := range objs {
		g := gpus[i]
		mu, _ := o["mem_usage"].(map[string]any) // none: both figures unknown
		used, okU, err1 := miB(mu["used_vram"])
		total, okT, err2 := miB(mu["total_vram"])
		if err1 != nil || err2 != nil {
			return nil, topology.NewParseError(src, 0, 0, fmt.Errorf("gpu %d: %w", g, cmp.Or(err1, err2)), "")
		}
		if okU && okT {
			out[g] = Memory{UsedMiB: used, TotalMiB: total}
		}
	}
	return out, nil
}

// miB reads {"value": n, "unit": "MB"} (or a bare number, taken as MiB).
func miB(v any) (int64, bool, error) {
	n, ok, err := jsonInt(v)
	if err != nil || !ok {
		return 0, false, err
	}
	if n < 0 || n > 1<<50 {
		return 0, false, fmt.Errorf("%w: memory %d", topology.ErrBadNumber, n)
	}
	m, _ := v.(map[string]any)
	unit := strings.ToUpper(cmp.Or(jsonString(m["unit"]), "MB"))
	if unit == "MB" || unit == "MIB" {
		return n, true, nil
	}
	return 0, false, fmt.Errorf("%w: memory unit %q", topology.ErrSyntax, unit)
}
