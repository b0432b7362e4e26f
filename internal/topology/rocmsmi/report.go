// Package rocmsmi turns rocm-smi's text output into a topology.Model:
// ParseText makes a Report of one output, Merge combines reports, Model
// builds the model, and Discover runs rocm-smi and does all three.
package rocmsmi

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/amdrun/amdrun/internal/topology"
)

// Source is the Model.Source of models built from rocm-smi output.
const Source = "rocm-smi"

// maxDevices bounds device indices and matrix sizes, so that hostile input
// cannot make the parsers allocate without limit.
const maxDevices = 1024

// Unknown marks an integer field of DeviceInfo or Pair the output did not give.
const Unknown = -1

// Report is what one or more rocm-smi outputs said about a node.
type Report struct {
	Devices map[int]*DeviceInfo // by rocm-smi's GPU index
	Pairs   map[[2]int]*Pair    // by {a, b} with a < b
	Version string              // "ROCM-SMI version: ..." or ""
	Notes   []string            // oddities seen while parsing; Model warns them
	Ended   bool                // the output had the "End of ROCm SMI Log" banner
	Listed  map[string][]int    // per section title, the GPUs it printed, ascending
}

// DeviceInfo is what rocm-smi said about one GPU; a field it did not give
// is Unknown (negative for floats).
type DeviceInfo struct {
	Name     string // "AMD Instinct MI300X OAM"
	PCIBus   string // "0000:26:00.0"
	UniqueID string // "0x8d1457e2c20f59d2"
	// NUMANode is "(Topology) Numa Node" (KFD's nearest CPU node),
	// NUMAAffinity "(Topology) Numa Affinity" (the PCI device's numa_node).
	NUMANode, NUMAAffinity      int
	UtilPercent                 float64 // "GPU use (%)", the concise GPU%
	MemUsedPct                  float64 // the concise VRAM%, "GPU memory use (%)"
	MemTotalBytes, MemUsedBytes int64   // from --showmeminfo vram
	// SecondDie says the concise table shows no power of its own (AvgPwr
	// N/A, PwrCap 0.0W): a further die of the device before it (MI250).
	SecondDie bool
	InConcise bool // the device has a row in the concise table
}

// Pair is what rocm-smi said about two GPUs' path; integers not given are Unknown.
type Pair struct {
	Weight int
	Hops   int
	Type   string // as printed, upper case ("XGMI", "PCIE"), or ""
	// TypeOther is the other direction's link type when the two disagree,
	// else ""; Model resolves them with topology.ResolveLinkType.
	TypeOther    string
	MinBandwidth int64 // --shownodesbw's MB/s; 0-0: not direct
	MaxBandwidth int64
}

// NewReport returns an empty Report (the only way to make one).
func NewReport() *Report {
	return &Report{Devices: map[int]*DeviceInfo{}, Pairs: map[[2]int]*Pair{}, Listed: map[string][]int{}}
}

func newDeviceInfo() *DeviceInfo {
	return &DeviceInfo{NUMANode: Unknown, NUMAAffinity: Unknown,
		UtilPercent: -1, MemUsedPct: -1, MemTotalBytes: Unknown, MemUsedBytes: Unknown}
}

// device returns the entry for GPU i, creating it.
func (r *Report) device(i int) *DeviceInfo {
	if r.Devices[i] == nil {
		r.Devices[i] = newDeviceInfo()
	}
	return r.Devices[i]
}

// pair returns the entry for GPUs a and b (a != b), creating it.
func (r *Report) pair(a, b int) *Pair {
	k := [2]int{min(a, b), max(a, b)}
	if r.Pairs[k] == nil {
		r.Pairs[k] = &Pair{Weight: Unknown, Hops: Unknown, MinBandwidth: Unknown, MaxBandwidth: Unknown}
	}
	return r.Pairs[k]
}

// list records that the section titled title printed GPUs idx.
func (r *Report) list(title string, idx ...int) {
	for _, i := range idx {
		if k, found := slices.BinarySearch(r.Listed[title], i); !found {
			r.Listed[title] = slices.Insert(r.Listed[title], k, i)
		}
	}
}

// Agree checks that two reports, of the rocm-smi calls name and otherName,
// give the same GPU indices and no GPU a different PCI bus or NUMA node,
// else returns an error wrapping topology.ErrInconsistent naming both calls.
func (r *Report) Agree(other *Report, name, otherName string) error {
	a, b := r.listed(), other.listed()
	if len(a) > 0 && len(b) > 0 && !slices.Equal(a, b) {
		return fmt.Errorf("rocm-smi: %w: `%s` lists %s but `%s` lists %s; was one output cut short?",
			topology.ErrInconsistent, name, gpuList(a), otherName, gpuList(b))
	}
	for _, i := range sortedKeys(r.Devices) {
		x, y := r.Devices[i], other.Devices[i]
		switch {
		case y == nil:
		case x.PCIBus != "" && y.PCIBus != "" && x.PCIBus != y.PCIBus:
			return fmt.Errorf("rocm-smi: %w: GPU[%d] is at %s in `%s` but at %s in `%s`", topology.ErrInconsistent, i, x.PCIBus, name, y.PCIBus, otherName)
		case x.NUMANode != Unknown && y.NUMANode != Unknown && x.NUMANode != y.NUMANode:
			return fmt.Errorf("rocm-smi: %w: GPU[%d] is on NUMA node %d in `%s` but %d in `%s`", topology.ErrInconsistent, i, x.NUMANode, name, y.NUMANode, otherName)
		case x.NUMAAffinity != Unknown && y.NUMAAffinity != Unknown && x.NUMAAffinity != y.NUMAAffinity:
			return fmt.Errorf("rocm-smi: %w: GPU[%d] has NUMA affinity %d in `%s` but %d in `%s`", topology.ErrInconsistent, i, x.NUMAAffinity, name, y.NUMAAffinity, otherName)
		}
	}
	return nil
}

// listed returns the GPUs the report's sections (all alike) printed, or nil.
func (r *Report) listed() []int {
	for _, l := range r.Listed {
		return l
	}
	return nil
}

// gpuList prints ascending indices compactly: "GPU 0-3, 6 (5 GPUs)".
func gpuList(idx []int) string {
	return fmt.Sprintf("GPU %s (%d)", strings.ReplaceAll(topology.FormatCPUList(idx), ",", ", "), len(idx))
}

func (r *Report) note(format string, args ...any) {
	r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
}

// Merge adds what other says to r: other's known values win.
func (r *Report) Merge(other *Report) {
	for _, i := range sortedKeys(other.Devices) {
		o, d := other.Devices[i], r.device(i)
		d.Name = cmp.Or(o.Name, d.Name)
		d.PCIBus = cmp.Or(o.PCIBus, d.PCIBus)
		d.UniqueID = cmp.Or(o.UniqueID, d.UniqueID)
		setKnown(&d.NUMANode, o.NUMANode)
		setKnown(&d.NUMAAffinity, o.NUMAAffinity)
		setKnown(&d.UtilPercent, o.UtilPercent)
		setKnown(&d.MemUsedPct, o.MemUsedPct)
		setKnown(&d.MemTotalBytes, o.MemTotalBytes)
		setKnown(&d.MemUsedBytes, o.MemUsedBytes)
		if o.InConcise {
			d.InConcise, d.SecondDie = true, o.SecondDie
		}
	}
	for k, o := range other.Pairs {
		p := r.pair(k[0], k[1])
		setKnown(&p.Weight, o.Weight)
		setKnown(&p.Hops, o.Hops)
		if o.Type != "" {
			p.Type, p.TypeOther = o.Type, o.TypeOther
		}
		if o.MaxBandwidth != Unknown {
			p.MinBandwidth, p.MaxBandwidth = o.MinBandwidth, o.MaxBandwidth
		}
	}
	r.Version = cmp.Or(other.Version, r.Version)
	r.Notes = append(r.Notes, other.Notes...)
	r.Ended = r.Ended || other.Ended
	for t, l := range other.Listed {
		r.list(t, l...)
	}
}

// setKnown sets *dst to v unless v is unknown (negative).
func setKnown[T int | int64 | float64](dst *T, v T) {
	if v >= 0 {
		*dst = v
	}
}

// indices returns every GPU index the report mentions, ascending.
func (r *Report) indices() []int {
	seen := map[int]bool{}
	for i := range r.Devices {
		seen[i] = true
	}
	for k := range r.Pairs {
		seen[k[0]], seen[k[1]] = true, true
	}
	return sortedKeys(seen)
}

func sortedKeys[V any](m map[int]V) []int { return slices.Sorted(maps.Keys(m)) }

// Model builds a finished topology.Model from the report: one device per
// GPU index mentioned anywhere, in index order, and one link per pair:
// XGMI when the link type says so or, without one, when --shownodesbw is
// non-zero; else PCIe through the host (SYS when hops >= 3, or weight >= 52
// without hops). SecondDie devices join the package of the device before
// them ("pkg0", ...). Notes and other oddities go to warn.
func (r *Report) Model(warn topology.Warner) (*topology.Model, error) {
	for _, n := range r.Notes {
		warn.Warn("%s", n)
	}
	idx := r.indices()
	if len(idx) == 0 {
		return nil, topology.NewParseError(Source, 0, 0, topology.ErrNoDevices, "")
	}
	if idx[len(idx)-1] != len(idx)-1 {
		warn.Warn("rocm-smi: GPU indices %v are not 0-%d; devices are renumbered by position", idx, len(idx)-1)
	}
	m := &topology.Model{Source: Source, SourceVersion: r.Version, Vendor: topology.VendorAMD}
	m.Devices = r.devices(idx, warn)
	m.Links = r.links(idx, warn)
	if len(idx) > 1 && len(m.Links) == 0 {
		warn.Warn("rocm-smi: no topology in the output; assuming every pair talks through the host")
	}
	if err := m.Finish(); err != nil {
		return nil, fmt.Errorf("rocm-smi: %w", err)
	}
	return m, nil
}

// devices makes device p of GPU idx[p]; where Numa Node and Numa Affinity
// differ, the affinity wins with one warning.
func (r *Report) devices(idx []int, warn topology.Warner) []topology.Device {
	devs := make([]topology.Device, len(idx))
	pkg, part, prevConcise := -1, 0, false
	var numaDiffers []string
	for p, i := range idx {
		info := cmp.Or(r.Devices[i], newDeviceInfo())
		d := topology.Device{Index: p, RuntimeIndex: i, Vendor: topology.VendorAMD, NUMANode: info.NUMAAffinity,
			Name: info.Name, PCIAddress: info.PCIBus, UniqueID: info.UniqueID, UtilPercent: max(info.UtilPercent, 0)}
		switch { // Unknown NUMA figures and UtilPercent are -1
		case d.NUMANode < 0:
			d.NUMANode = info.NUMANode
		case info.NUMANode >= 0 && info.NUMANode != d.NUMANode:
			numaDiffers = append(numaDiffers, fmt.Sprintf("GPU[%d] %d vs %d", i, info.NUMANode, info.NUMAAffinity))
		}
		if info.MemTotalBytes > 0 && info.MemUsedBytes >= 0 {
			d.MemTotalMiB, d.MemUsedMiB = info.MemTotalBytes>>20, info.MemUsedBytes>>20
		} else if info.MemUsedPct >= 0 {
			d.MemUsedPct = info.MemUsedPct
		}
		switch {
		case info.SecondDie && prevConcise && p > 0:
			if devs[p-1].Package == "" {
				pkg, part = pkg+1, 0
				devs[p-1].Package = fmt.Sprintf("pkg%d", pkg)
			}
			part++
			d.Package, d.Partition = devs[p-1].Package, part
		case info.SecondDie:
			warn.Warn("rocm-smi: GPU[%d] reports no power of its own but has no device before it in the concise table", i)
		}
		prevConcise = info.InConcise
		devs[p] = d
	}
	if len(numaDiffers) > 0 {
		warn.Warn("rocm-smi: Numa Node differs from Numa Affinity for %s; using the affinity", clipList(numaDiffers, 6))
	}
	return devs
}

// links makes the link of each usable pair; Finish adds the others.
func (r *Report) links(idx []int, warn topology.Warner) []topology.Link {
	var out []topology.Link
	for a := 0; a < len(idx); a++ {
		for b := a + 1; b < len(idx); b++ {
			if pr := r.Pairs[[2]int{idx[a], idx[b]}]; pr != nil {
				if l, ok := link(*pr, idx[a], idx[b], warn); ok {
					l.A, l.B = a, b
					out = append(out, l)
				}
			}
		}
	}
	return out
}

// link turns one pair into a link; ok is false when it says nothing usable.
func link(p Pair, a, b int, warn topology.Warner) (topology.Link, bool) {
	if p.TypeOther != "" {
		var note string
		p.Type, note = topology.ResolveLinkType(p.Type, p.TypeOther, p.Weight, p.Hops)
		warn.Warn("rocm-smi: GPU%d-GPU%d: %s", a, b, note)
	}
	l := topology.Link{Weight: max(p.Weight, 0), Hops: max(p.Hops, 0)}
	bw := p.MaxBandwidth > 0
	switch {
	case p.Type == "PCIE" && bw:
		warn.Warn("rocm-smi: GPU%d-GPU%d: link type PCIE but --shownodesbw %d-%d MB/s; treating as PCIe", a, b, p.MinBandwidth, p.MaxBandwidth)
	case p.Type == "" && p.MaxBandwidth == Unknown && p.Weight == Unknown && p.Hops == Unknown:
		return l, false
	case p.Type == "XGMI" || p.Type == "" && bw:
		// "0-0" means not connected directly (MI250 GCDs two XGMI hops apart).
		l.Type, l.Level, l.Direct = topology.LinkXGMI, "XGMI", p.MaxBandwidth != 0
		l.Hops = cmp.Or(l.Hops, 1)
		if bw {
			l.MinBandwidth, l.MaxBandwidth = cmp.Or(p.MinBandwidth, p.MaxBandwidth), p.MaxBandwidth
		}
		return l, true
	}
	l.Type, l.Direct, l.Level = topology.LinkPCIe, false, topology.LevelPHB
	if p.Hops >= 3 || (p.Hops == Unknown && p.Weight >= 52) {
		l.Level = topology.LevelSYS
	}
	l.Hops = cmp.Or(l.Hops, 2)
	return l, true
}

// Tool is the program Discover runs.
const Tool = "rocm-smi"

// The argument lists Discover passes to rocm-smi, in the order it runs them.
var (
	TopoArgs = []string{"--showtopo", "--shownodesbw"}
	// TopoFallbackArgs is for rocm-smi before ROCm 5.0 (no --shownodesbw).
	TopoFallbackArgs = []string{"--showtopo"}
	InfoArgs         = []string{"--showuse", "--showmemuse", "--showmeminfo", "vram", "--showbus", "--showuniqueid", "--showproductname"}
	// ConciseArgs prints the concise table, the only place an MI250's second die shows.
	ConciseArgs = []string{}
	VersionArgs = []string{"--version"}
)

// Discover builds the node's model from rocm-smi, run through run with
// TopoArgs (required; TopoFallbackArgs on an old rocm-smi), InfoArgs,
// ConciseArgs and VersionArgs in turn; failures of the last three are
// warnings. Outputs must be whole (else ErrTruncated) and agree (Report.Agree).
func Discover(ctx context.Context, run topology.Runner, warn topology.Warner) (*topology.Model, error) {
	args := TopoArgs
	out, err := run(ctx, Tool, args...)
	if err != nil {
		// Only an old rocm-smi refusing the flag (argparse: exit status 2)
		// is worth a retry; a timeout or a driver error would repeat.
		var te *topology.ToolError
		if !errors.As(err, &te) || te.ExitCode != 2 || errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
			return nil, err
		}
		warn.Warn("rocm-smi: %v; retrying without --shownodesbw", err)
		args = TopoFallbackArgs
		if out, err = run(ctx, Tool, args...); err != nil {
			return nil, err
		}
	}
	rep, err := ParseText(bytes.NewReader(out))
	if err == nil {
		err = whole(rep, args)
	}
	if err != nil {
		return nil, err
	}
	// Warn about each --showtopo section an output with one of its matrices
	// lacks, which would otherwise leave facts out without a word.
	var lack []string
	matrices := 0
	for i, t := range showtopoTitles {
		if _, ok := rep.Listed[t]; !ok {
			lack = append(lack, fmt.Sprintf("%q", t))
		} else if i < 3 {
			matrices++
		}
	}
	if len(lack) > 0 && matrices > 0 {
		warn.Warn("rocm-smi: `%s` printed no %s section; continuing without it", command(args), strings.Join(lack, ", "))
	}
	for _, more := range [][]string{InfoArgs, ConciseArgs} {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("rocm-smi: %w", err)
		}
		out, err := run(ctx, Tool, more...)
		if err != nil {
			warn.Warn("rocm-smi: %v; continuing without it", err)
			continue
		}
		r, err := ParseText(bytes.NewReader(out))
		if err != nil {
			warn.Warn("%v; ignoring that output", err)
			continue
		}
		if err := cmp.Or(whole(r, more), rep.Agree(r, command(args), command(more))); err != nil {
			return nil, err
		}
		rep.Merge(r)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("rocm-smi: %w", err)
	}
	if out, err := run(ctx, Tool, VersionArgs...); err == nil {
		if v, err := ParseText(bytes.NewReader(out)); err == nil {
			rep.Version = v.Version
		}
	}
	return rep.Model(warn)
}

// showtopoTitles are the sections rocm-smi --showtopo prints.
var showtopoTitles = []string{"weight between two gpus", "hops between two gpus", "link type between two gpus", "numa nodes"}

// command is the command line of a rocm-smi run, for messages.
func command(args []string) string {
	return strings.Join(append([]string{Tool}, args...), " ")
}

// whole refuses an output cut short (no "End of ROCm SMI Log" banner).
func whole(r *Report, args []string) error {
	if r.Ended {
		return nil
	}
	return topology.NewParseError(command(args), 0, 0, topology.ErrTruncated, "no \"End of ROCm SMI Log\" line, the output was cut short")
}
