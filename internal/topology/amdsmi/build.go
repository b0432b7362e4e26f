package amdsmi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"github.com/amdrun/amdrun/internal/topology"
)

// Build joins a parsed topology with identity and use figures (gpus, nil
// or partial, matched by BDF, else index) into a finished model, devices in
// amd-smi's order. RuntimeIndex is the HIP-ID when every device has a
// distinct one, else the amd-smi index. Rows sharing a PCI bus and device
// are one Package. XGMI pairs become direct links; a disputed type is
// decided by topology.ResolveLinkType, with a warning, as are missing
// WantTables. Errors wrap topology.ErrInvalidModel.
func Build(t *Topology, gpus []GPU, warn topology.Warner) (*topology.Model, error) {
	n := len(t.GPUs)
	// Warn once about the WantTables t lacks and what Build assumes.
	var missing, assumed []string
	for _, table := range WantTables {
		if n > 1 && !t.has(table) {
			missing = append(missing, strings.TrimSuffix(table, " TABLE"))
			assumed = append(assumed, assumedWithout[table])
		}
	}
	if len(missing) > 0 {
		warn.Warn("amd-smi: %s has no %s table; assuming %s", SourceTopology, strings.Join(missing, ", "), strings.Join(assumed, "; "))
	}
	infos := identities(t, gpus, warn)
	m := &topology.Model{Source: "amd-smi", Vendor: topology.VendorAMD, Bandwidth: "theoretical"}
	// The HIP-IDs are the runtime indices when every device has a distinct one.
	seen, known := map[int]bool{}, 0
	for _, g := range infos {
		if g.HIPID >= 0 {
			seen[g.HIPID] = true
			known++
		}
	}
	useHIP := len(seen) == len(infos) // all known, none repeated
	if !useHIP && known > 0 {
		warn.Warn("amd-smi: HIP-IDs known for %d of %d GPUs or repeated; using amd-smi GPU indices as runtime indices", known, len(infos))
	}
	m.Devices = devices(infos, useHIP)
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

// assumedWithout says what Build assumes without each of WantTables.
var assumedWithout = map[string]string{
	"ACCESS TABLE":    "peer access as the link allows",
	"WEIGHT TABLE":    "weights 0",
	"HOPS TABLE":      "hops by link type",
	"LINK TYPE TABLE": "link types from weight and hops (a pair they do not decide goes through the host)",
	"NUMA BW TABLE":   "bandwidths by link type",
}

// identities gives each row the GPU of gpus with its BDF, else its index.
func identities(t *Topology, gpus []GPU, warn topology.Warner) []GPU {
	infos := make([]GPU, len(t.GPUs))
	for i := range infos {
		info := NewGPU(t.GPUs[i])
		info.BDF = t.BDFs[i]
		k := slices.IndexFunc(gpus, func(g GPU) bool { return g.BDF != "" && g.BDF == info.BDF })
		if k < 0 {
			k = slices.IndexFunc(gpus, func(g GPU) bool { return g.Index == info.Index })
			if k >= 0 && info.BDF != "" && gpus[k].BDF != "" {
				k = -1 // the index names another GPU
			}
		}
		if k >= 0 {
			info.merge(gpus[k])
		} else if len(gpus) > 0 {
			warn.Warn("amd-smi: no identity for GPU %d (%s)", t.GPUs[i], info.BDF)
		}
		infos[i] = info
	}
	return infos
}

// devices numbers partitions of one GPU by PCI function, as KFD does by location_id.
func devices(infos []GPU, useHIP bool) []topology.Device {
	slots := map[string][]string{}
	for _, g := range infos {
		if s := slotOf(g.BDF); s != "" {
			slots[s] = append(slots[s], g.BDF)
		}
	}
	for _, fs := range slots {
		sort.Strings(fs)
	}
	out := make([]topology.Device, 0, len(infos))
	for i, g := range infos {
		d := topology.Device{Index: i, RuntimeIndex: g.Index, Vendor: topology.VendorAMD, Name: g.Name,
			PCIAddress: g.BDF, UniqueID: g.UUID, Partition: g.PartitionID, NUMANode: -1}
		if useHIP {
			d.RuntimeIndex = g.HIPID
		}
		if fs := slots[slotOf(g.BDF)]; len(fs) > 1 {
			d.Package = slotOf(g.BDF)
			d.Partition = sort.SearchStrings(fs, g.BDF)
		}
		if g.MemUsedMiB >= 0 && g.MemTotalMiB > 0 {
			d.MemUsedMiB, d.MemTotalMiB = g.MemUsedMiB, g.MemTotalMiB
		}
		d.Processes = max(g.Processes, 0) // -1: unknown
		out = append(out, d)
	}
	return out
}

// pairLink makes the link between rows a < b; ok is false when the type is unknown.
func pairLink(t *Topology, a, b int, warn topology.Warner) (topology.Link, bool) {
	p, q := t.Pairs[a][b], t.Pairs[b][a]
	// WEIGHT and HOPS are symmetric (check): the known reading, or -1.
	weight, hops := max(p.Weight, q.Weight), max(p.Hops, q.Hops)
	typ, note := topology.ResolveLinkType(p.Type, q.Type, weight, hops)
	if note != "" {
		warn.Warn("amd-smi: %s-%s: %s", t.label(a), t.label(b), note)
	}
	if typ == "" && !t.has("LINK TYPE TABLE") {
		typ = topology.InferLinkType(weight, hops) // Build warned
	}
	l := topology.Link{A: a, B: b, Level: typ, Weight: max(weight, 0), Hops: max(hops, 0)}
	// Of two bandwidth readings, the lower known one.
	lo := p
	if q.MaxBW > 0 && (p.MaxBW == 0 || q.MaxBW < p.MaxBW) {
		lo = q
	}
	l.MinBandwidth, l.MaxBandwidth = lo.MinBW, lo.MaxBW
	if p.MaxBW > 0 && q.MaxBW > 0 && (p.MinBW != q.MinBW || p.MaxBW != q.MaxBW) {
		warn.Warn("amd-smi: %s-%s: NUMA BW %d-%d one way and %d-%d the other; using %d-%d",
			t.label(a), t.label(b), p.MinBW, p.MaxBW, q.MinBW, q.MaxBW, lo.MinBW, lo.MaxBW)
	}
	switch typ {
	case topology.TypeXGMI:
		l.Type, l.Direct = topology.LinkXGMI, true
	case topology.TypePCIE:
		l.Type = topology.LinkPCIe
	default:
		return topology.Link{}, false
	}
	if hops < 0 {
		// amd-smi's meaning of the type, as rocm-smi's reader assumes.
		l.Hops = map[string]int{topology.TypeXGMI: 1, topology.TypePCIE: 2}[typ]
	}
	return l, true
}

// Commands Discover runs, in order; only the first is required (older
// amd-smi versions print help for a bare `amd-smi`).
var (
	argsTopology     = []string{"topology"}
	argsTopologyJSON = []string{"topology", "--json"}
	argsDefault      = []string{}
	argsList         = []string{"list", "--json"}
	argsProcess      = []string{"process", "--json"}
	argsMemUsage     = []string{"metric", "--mem-usage", "--json"}
)

// Discover runs amd-smi through run (the args* commands above, each only
// when needed) and builds a finished model. Only the topology is required;
// other failures are one warning each. The default table and the list must
// name the topology's GPUs or their partitions, else
// topology.ErrInconsistent names both commands.
func Discover(ctx context.Context, run topology.Runner, warn topology.Warner) (*topology.Model, error) {
	d := &discovery{ctx: ctx, run: run, warn: warn}
	for _, step := range []func() error{d.topology, d.identity, d.use} {
		if err := step(); err != nil {
			return nil, err
		}
	}
	m, err := Build(d.t, d.gpus, warn)
	if err != nil {
		return nil, err
	}
	m.SourceVersion = d.version
	return m, nil
}

// discovery is one run of Discover: what the calls so far gave.
type discovery struct {
	ctx     context.Context
	run     topology.Runner
	warn    topology.Warner
	t       *Topology
	gpus    []GPU
	version string
}

// topology runs `amd-smi topology`, falling back to --json when the call
// fails or prints no table; a cut or inconsistent text is refused, not replaced.
func (d *discovery) topology() error {
	out, err := d.run(d.ctx, "amd-smi", argsTopology...)
	if err == nil {
		d.t, err = ParseTopology(bytes.NewReader(out))
	}
	var te *topology.ToolError
	if err != nil && d.ctx.Err() == nil && (errors.As(err, &te) || errors.Is(err, topology.ErrWrongTool)) {
		if jout, jerr := d.run(d.ctx, "amd-smi", argsTopologyJSON...); jerr == nil {
			if jt, jerr := ParseTopologyJSON(bytes.NewReader(jout)); jerr == nil {
				d.warn.Warn("%v; read `%s` instead", err, SourceTopologyJSON)
				d.t, err = jt, nil
			}
		}
	}
	return err
}

// optional runs a call whose failure is a warning, unless ctx ended or it is an inconsistency.
func (d *discovery) optional(args []string, parse func([]byte) error) error {
	out, err := d.run(d.ctx, "amd-smi", args...)
	if err == nil {
		err = parse(out)
	}
	switch {
	case err == nil:
	case d.ctx.Err() != nil:
		return d.ctx.Err()
	case errors.Is(err, topology.ErrInconsistent):
		return err
	case errors.As(err, new(*topology.ParseError)) && errors.Is(err, topology.ErrWrongTool) && len(args) == 0:
		d.warn.Warn("amd-smi: no default table (amd-smi older than 25?); HIP-IDs unknown")
	default:
		// The error names the call already ("amd-smi list --json: exit status 2: ...").
		d.warn.Warn("%v; continuing without it", err)
	}
	return nil
}

// join checks that a device list names the topology's GPUs or their partitions.
func (d *discovery) join(src string, gpus []GPU) error {
	if j, ok := JoinPartitions(d.t, gpus); ok {
		d.warn.Warn("amd-smi: `%s` lists %d GPUs, `%s` %d partitions of them; each partition takes its GPU's links, and partitions of one GPU are one package joined by XGMI",
			SourceTopology, len(d.t.BDFs), src, len(j.BDFs))
		d.t = j
		return nil
	}
	return agreeBDFs(SourceTopology, d.t.BDFs, src, gpus)
}

// identity runs the default table and the list.
func (d *discovery) identity() error {
	if err := d.optional(argsDefault, func(b []byte) error {
		s, err := ParseDefault(bytes.NewReader(b))
		if err == nil {
			err = d.join(SourceDefault, s.GPUs)
		}
		if err == nil {
			d.version, d.gpus = s.Version, s.GPUs
		}
		return err
	}); err != nil {
		return err
	}
	return d.optional(argsList, func(b []byte) error {
		list, err := ParseListJSON(bytes.NewReader(b))
		if err == nil {
			err = d.join(SourceListJSON, list)
		}
		if err == nil {
			d.gpus = mergeGPUs(d.gpus, list)
		}
		return err
	})
}

// use runs the process and memory calls for what the default table lacked.
func (d *discovery) use() error {
	haveMem := slices.ContainsFunc(d.gpus, func(g GPU) bool { return g.MemTotalMiB > 0 })
	if !slices.ContainsFunc(d.gpus, func(g GPU) bool { return g.Processes >= 0 }) {
		if err := perGPU(d, argsProcess, ParseProcessJSON, func(g *GPU, n int) { g.Processes = n }); err != nil {
			return err
		}
	}
	if haveMem {
		return nil
	}
	return perGPU(d, argsMemUsage, ParseMemUsageJSON, func(g *GPU, mu Memory) { g.MemUsedMiB, g.MemTotalMiB = mu.UsedMiB, mu.TotalMiB })
}

// perGPU runs an optional call giving a figure per amd-smi GPU index.
func perGPU[T any](d *discovery, args []string, parse func(io.Reader) (map[int]T, error), set func(*GPU, T)) error {
	return d.optional(args, func(b []byte) error {
		byIndex, err := parse(bytes.NewReader(b))
		if err != nil {
			return err
		}
		if len(d.gpus) == 0 { // no identity source answered
			for i, idx := range d.t.GPUs {
				d.gpus = append(d.gpus, NewGPU(idx))
				d.gpus[i].BDF = d.t.BDFs[i]
			}
		}
		for i := range d.gpus {
			if v, ok := byIndex[d.gpus[i].Index]; ok {
				set(&d.gpus[i], v)
			}
		}
		return nil
	})
}

// agreeBDFs checks that two calls list the same PCI addresses, if both give any.
func agreeBDFs(name string, bdfs []string, otherName string, gpus []GPU) error {
	var other []string
	for _, g := range gpus {
		other = append(other, g.BDF)
	}
	a, b := bdfSet(bdfs), bdfSet(other)
	if len(a) == 0 || len(b) == 0 || slices.Equal(a, b) {
		return nil // the old topology --json schema gives no BDFs
	}
	return fmt.Errorf("amd-smi: %w: `%s` lists %d GPU(s), `%s` %d%s%s", topology.ErrInconsistent,
		name, len(a), otherName, len(b), only(name, a, b), only(otherName, b, a))
}

// bdfSet returns the distinct non-empty addresses, sorted.
func bdfSet(s []string) []string {
	out := slices.DeleteFunc(slices.Clone(s), func(b string) bool { return b == "" })
	slices.Sort(out)
	return slices.Compact(out)
}

// only names the addresses of a (sorted) that b (sorted) lacks, if any.
func only(name string, a, b []string) string {
	a = slices.DeleteFunc(slices.Clone(a), func(x string) bool {
		_, in := slices.BinarySearch(b, x)
		return in
	})
	if len(a) == 0 {
		return ""
	}
	return fmt.Sprintf("; only `%s` has %s", name, strings.Join(a, ", "))
}

// mergeGPUs fills base's unknown fields from extra (by BDF, else index).
func mergeGPUs(base, extra []GPU) []GPU {
	for _, e := range extra {
		i := slices.IndexFunc(base, func(b GPU) bool {
			return (e.BDF != "" && b.BDF == e.BDF) || ((e.BDF == "" || b.BDF == "") && b.Index == e.Index)
		})
		if i < 0 {
			base = append(base, e)
		} else {
			base[i].merge(e)
		}
	}
	return base
}

// Partitioned MI300X (issue 24): each GPU shows as 2 to 8 devices on its
// next PCI functions; `amd-smi topology` may list only the physical GPUs.

// slotOf returns the bus and device of a PCI address ("0000:05:00"), or "".
func slotOf(bdf string) string {
	if i := strings.LastIndexByte(bdf, '.'); i >= 0 {
		return bdf[:i]
	}
	return ""
}

// JoinPartitions returns t with one row per device of gpus, in index
// order, when gpus lists t's GPUs and further PCI functions of them. Each
// partition inherits its GPU's links; partitions of one GPU are joined by
// one-hop XGMI. Otherwise it returns t and false.
func JoinPartitions(t *Topology, gpus []GPU) (*Topology, bool) {
	row, bySlot := map[string]int{}, map[string]int{}
	for i, b := range t.BDFs {
		if _, dup := bySlot[slotOf(b)]; b == "" || dup {
			return t, false // an address unknown, or t lists partitions itself
		}
		row[b], bySlot[slotOf(b)] = i, i
	}
	seen, extra := map[string]bool{}, false
	for _, g := range gpus {
		_, inT := row[g.BDF]
		if _, inSlot := bySlot[slotOf(g.BDF)]; g.BDF == "" || seen[g.BDF] || !inSlot {
			return t, false
		}
		seen[g.BDF], extra = true, extra || !inT
	}
	if !extra || len(gpus) > MaxGPUs || slices.ContainsFunc(t.BDFs, func(b string) bool { return !seen[b] }) {
		return t, false
	}
	logical := slices.Clone(gpus)
	sort.SliceStable(logical, func(a, b int) bool { return logical[a].Index < logical[b].Index })
	n := len(logical)
	j := newTopology(n)
	j.Tables = t.Tables
	parent := make([]int, n)
	for i, g := range logical {
		j.GPUs[i], j.BDFs[i], parent[i] = g.Index, g.BDF, bySlot[slotOf(g.BDF)]
	}
	for a := 0; a < n; a++ {
		for b := 0; b < n; b++ {
			pa, pb := parent[a], parent[b]
			j.Pairs[a][b] = t.Pairs[pa][pb]
			if a != b && pa == pb {
				j.Pairs[a][b] = Pair{Access: "ENABLED", Weight: -1, Hops: 1, Type: topology.TypeXGMI}
			}
		}
	}
	return j, true
}
