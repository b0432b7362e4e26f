package amdsmi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/amdrun/amdrun/internal/topology"
)

// Build joins a parsed topology with identity and use figures into a
// finished model (Source "amd-smi", Vendor amd). Devices are numbered
// 0..N-1 in the topology's row order, which is amd-smi's GPU order.
//
// gpus may be nil or partial; each row takes the GPU with the same BDF,
// else the same amd-smi index. RuntimeIndex is the HIP-ID when every
// device has a distinct one, otherwise the amd-smi GPU index (with a
// warning when only some are known). XGMI pairs become direct links whose
// bandwidth is the NUMA BW maximum; a 0 or missing figure is left 0 so
// that topology.Finish assumes one for the type. PCIE pairs become
// non-direct links. Weight and hops are kept (0 when not reported). Pairs
// of unknown type are left to Finish, which links them through the host.
// Errors wrap topology.ErrNoDevices or topology.ErrInvalidModel.
func Build(t *Topology, gpus []GPU, warn topology.Warner) (*topology.Model, error) {
	if t == nil || len(t.GPUs) == 0 {
		return nil, fmt.Errorf("amd-smi: %w", topology.ErrNoDevices)
	}
	n := len(t.GPUs)
	if len(t.BDFs) != n || len(t.Pairs) != n {
		return nil, fmt.Errorf("amd-smi: %w: topology rows disagree", topology.ErrInvalidModel)
	}
	byBDF, byIndex := map[string]int{}, map[int]int{}
	for i, g := range gpus {
		if g.BDF != "" {
			if _, dup := byBDF[g.BDF]; !dup {
				byBDF[g.BDF] = i
			}
		}
		if _, dup := byIndex[g.Index]; !dup {
			byIndex[g.Index] = i
		}
	}
	m := &topology.Model{Source: "amd-smi", Vendor: topology.VendorAMD, Bandwidth: "theoretical"}
	infos := make([]GPU, n)
	for i := range infos {
		info := NewGPU(t.GPUs[i])
		info.BDF = t.BDFs[i]
		k, ok := -1, false
		if info.BDF != "" {
			k, ok = byBDF[info.BDF]
		}
		if !ok {
			if k, ok = byIndex[t.GPUs[i]]; ok && info.BDF != "" && gpus[k].BDF != "" {
				ok = false // the same index names another GPU
			}
		}
		if ok {
			info.merge(gpus[k])
		} else if len(gpus) > 0 {
			warn.Warn("amd-smi: no identity for GPU %d (%s)", t.GPUs[i], info.BDF)
		}
		infos[i] = info
	}
	useHIP := true
	seenHIP := map[int]bool{}
	known := 0
	for _, g := range infos {
		if g.HIPID >= 0 {
			known++
			if seenHIP[g.HIPID] {
				useHIP = false
			}
			seenHIP[g.HIPID] = true
		} else {
			useHIP = false
		}
	}
	if !useHIP && known > 0 {
		warn.Warn("amd-smi: HIP-IDs known for %d of %d GPUs or repeated; using amd-smi GPU indices as runtime indices", known, n)
	}
	// Partitions of one GPU share bus and device and differ in function.
	slot := map[string]int{}
	for _, g := range infos {
		if g.BDF != "" {
			slot[g.BDF[:len(g.BDF)-2]]++
		}
	}
	for i, g := range infos {
		d := topology.Device{
			Index:        i,
			RuntimeIndex: g.Index,
			Vendor:       topology.VendorAMD,
			Name:         g.Name,
			PCIAddress:   g.BDF,
			UniqueID:     g.UUID,
			Partition:    g.PartitionID,
			NUMANode:     -1,
		}
		if useHIP {
			d.RuntimeIndex = g.HIPID
		}
		if g.BDF != "" && slot[g.BDF[:len(g.BDF)-2]] > 1 {
			d.Package = g.BDF[:len(g.BDF)-2]
		}
		if g.MemUsedMiB >= 0 && g.MemTotalMiB > 0 {
			d.MemUsedMiB, d.MemTotalMiB = g.MemUsedMiB, g.MemTotalMiB
		}
		if g.Processes > 0 {
			d.Processes = g.Processes
		}
		m.Devices = append(m.Devices, d)
	}
	for a := 0; a < n; a++ {
		for b := a + 1; b < n; b++ {
			if l, ok := pairLink(t, a, b, warn); ok {
				m.Links = append(m.Links, l)
			}
		}
	}
	if err := m.Finish(); err != nil {
		return nil, fmt.Errorf("amd-smi: %w", err)
	}
	return m, nil
}

// pairLink makes the link between rows a < b from both directions'
// reports; ok is false when the type is unknown.
func pairLink(t *Topology, a, b int, warn topology.Warner) (topology.Link, bool) {
	p, q := t.Pairs[a][b], t.Pairs[b][a]
	typ := p.Type
	if typ == "" || typ == "SELF" {
		typ = q.Type
	}
	if p.Type != "" && q.Type != "" && p.Type != q.Type {
		warn.Warn("amd-smi: GPU %d-%d link type %s one way, %s the other; using %s", t.GPUs[a], t.GPUs[b], p.Type, q.Type, typ)
	}
	pick := func(x, y int) int {
		if x < 0 {
			x = y
		}
		if x < 0 {
			return 0
		}
		return x
	}
	l := topology.Link{A: a, B: b, Level: typ, Weight: pick(p.Weight, q.Weight), Hops: pick(p.Hops, q.Hops)}
	l.MinBandwidth, l.MaxBandwidth = p.MinBW, p.MaxBW
	if l.MaxBandwidth == 0 {
		l.MinBandwidth, l.MaxBandwidth = q.MinBW, q.MaxBW
	}
	switch typ {
	case "XGMI":
		l.Type, l.Direct = topology.LinkXGMI, true
	case "PCIE":
		l.Type = topology.LinkPCIe
	default:
		if typ == "SELF" {
			warn.Warn("amd-smi: GPU %d-%d reported as SELF; treating as a host link", t.GPUs[a], t.GPUs[b])
		}
		return topology.Link{}, false
	}
	return l, true
}

// Commands Discover runs, in order. The first is required; the others
// add identity and use and may fail (older amd-smi versions print help
// for a bare `amd-smi`), which only warns.
var (
	argsTopology = []string{"topology"}
	argsDefault  = []string{}
	argsList     = []string{"list", "--json"}
	argsProcess  = []string{"process", "--json"}
	argsMemUsage = []string{"metric", "--mem-usage", "--json"}
)

// Discover runs amd-smi through run and builds a finished model. It runs,
// as argv:
//
//	amd-smi topology                          (required)
//	amd-smi                                   (BDF, HIP-ID, partition mode, memory, processes)
//	amd-smi list --json                       (UUID, partition id, HIP-ID on newer versions)
//	amd-smi process --json                    (only when the default table gave no process box)
//	amd-smi metric --mem-usage --json         (only when it gave no memory figures)
//
// A failure of the first command is returned as run gave it (an error
// wrapping topology.ErrToolNotFound, or a *topology.ToolError); failures
// of the others go to warn, in one line each. The default table and the
// list must name the same GPUs (PCI addresses) as the topology, or
// Discover fails with an error wrapping topology.ErrInconsistent naming
// both commands. A cancelled ctx stops Discover with ctx.Err().
func Discover(ctx context.Context, run topology.Runner, warn topology.Warner) (*topology.Model, error) {
	out, err := run(ctx, "amd-smi", argsTopology...)
	if err != nil {
		return nil, err
	}
	t, err := ParseTopology(bytes.NewReader(out))
	if err != nil {
		return nil, err
	}
	var gpus []GPU
	version := ""
	optional := func(args []string, parse func([]byte) error) error {
		out, err := run(ctx, "amd-smi", args...)
		if err == nil {
			err = parse(out)
		}
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if errors.Is(err, topology.ErrInconsistent) {
				return err
			}
			var pe *topology.ParseError
			if errors.As(err, &pe) && errors.Is(err, topology.ErrWrongTool) && len(args) == 0 {
				warn.Warn("amd-smi: no default table (amd-smi older than 25?); HIP-IDs unknown")
				return nil
			}
			// The error names the call already ("amd-smi list --json:
			// exit status 2: ...", "amd-smi: empty output: ...").
			warn.Warn("%v; continuing without it", err)
		}
		return nil
	}
	haveProcs, haveMem := false, false
	if err := optional(argsDefault, func(b []byte) error {
		s, err := ParseDefault(bytes.NewReader(b))
		if err != nil {
			return err
		}
		version, gpus = s.Version, s.GPUs
		if err := agreeBDFs(SourceTopology, t.BDFs, SourceDefault, s.GPUs); err != nil {
			return err
		}
		for _, g := range gpus {
			haveProcs = haveProcs || g.Processes >= 0
			haveMem = haveMem || g.MemTotalMiB > 0
		}
		return nil
	}); err != nil {
		return nil, err
	}
	if err := optional(argsList, func(b []byte) error {
		list, err := ParseListJSON(bytes.NewReader(b))
		if err != nil {
			return err
		}
		if err := agreeBDFs(SourceTopology, t.BDFs, SourceListJSON, list); err != nil {
			return err
		}
		gpus = mergeGPUs(gpus, list)
		return nil
	}); err != nil {
		return nil, err
	}
	if !haveProcs {
		if err := optional(argsProcess, func(b []byte) error {
			procs, err := ParseProcessJSON(bytes.NewReader(b))
			if err != nil {
				return err
			}
			gpus = ensureGPUs(gpus, t)
			for i := range gpus {
				if c, ok := procs[gpus[i].Index]; ok {
					gpus[i].Processes = c
				}
			}
			return nil
		}); err != nil {
			return nil, err
		}
	}
	if !haveMem {
		if err := optional(argsMemUsage, func(b []byte) error {
			mem, err := ParseMemUsageJSON(bytes.NewReader(b))
			if err != nil {
				return err
			}
			gpus = ensureGPUs(gpus, t)
			for i := range gpus {
				if mu, ok := mem[gpus[i].Index]; ok {
					gpus[i].MemUsedMiB, gpus[i].MemTotalMiB = mu.UsedMiB, mu.TotalMiB
				}
			}
			return nil
		}); err != nil {
			return nil, err
		}
	}
	m, err := Build(t, gpus, warn)
	if err != nil {
		return nil, err
	}
	m.SourceVersion = version
	return m, nil
}

// agreeBDFs checks that two calls list the same GPUs (by PCI address):
// one that lists fewer was cut short, one that lists others describes
// another set of devices. gpus without any BDF (old amd-smi) are not
// compared. The error wraps topology.ErrInconsistent and names both
// calls.
func agreeBDFs(name string, bdfs []string, otherName string, gpus []GPU) error {
	var other []string
	for _, g := range gpus {
		if g.BDF != "" {
			other = append(other, g.BDF)
		}
	}
	if len(bdfs) == 0 || len(other) == 0 {
		return nil
	}
	a, b := bdfSet(bdfs), bdfSet(other)
	onlyA, onlyB := minus(a, b), minus(b, a)
	if len(onlyA) == 0 && len(onlyB) == 0 {
		return nil
	}
	msg := fmt.Sprintf("`%s` lists %d GPU(s), `%s` %d", name, len(a), otherName, len(b))
	if len(onlyA) > 0 {
		msg += fmt.Sprintf("; only `%s` has %s", name, strings.Join(onlyA, ", "))
	}
	if len(onlyB) > 0 {
		msg += fmt.Sprintf("; only `%s` has %s", otherName, strings.Join(onlyB, ", "))
	}
	return fmt.Errorf("amd-smi: %w: %s", topology.ErrInconsistent, msg)
}

// bdfSet returns the distinct addresses, sorted.
func bdfSet(s []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, b := range s {
		if !seen[b] {
			seen[b] = true
			out = append(out, b)
		}
	}
	sort.Strings(out)
	return out
}

// minus returns the elements of a not in b.
func minus(a, b []string) []string {
	in := map[string]bool{}
	for _, x := range b {
		in[x] = true
	}
	var out []string
	for _, x := range a {
		if !in[x] {
			out = append(out, x)
		}
	}
	return out
}

// mergeGPUs fills base's unknown fields from extra, matching by BDF, else
// by index; GPUs only in extra are appended.
func mergeGPUs(base, extra []GPU) []GPU {
	for _, e := range extra {
		found := false
		for i := range base {
			if (e.BDF != "" && base[i].BDF == e.BDF) || ((e.BDF == "" || base[i].BDF == "") && base[i].Index == e.Index) {
				base[i].merge(e)
				found = true
				break
			}
		}
		if !found {
			base = append(base, e)
		}
	}
	return base
}

// ensureGPUs gives one GPU per topology row when no identity source
// answered, so that use figures keyed by index have somewhere to go.
func ensureGPUs(gpus []GPU, t *Topology) []GPU {
	if len(gpus) > 0 {
		return gpus
	}
	for i, idx := range t.GPUs {
		g := NewGPU(idx)
		g.BDF = t.BDFs[i]
		gpus = append(gpus, g)
	}
	return gpus
}
