// Package kfd reads the GPU topology the amdgpu kernel driver (KFD)
// publishes in sysfs, and which processes use which GPU, through an fs.FS
// that allows concurrent reads.
package kfd

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/amdrun/amdrun/internal/topology"
	"github.com/amdrun/amdrun/internal/topology/host"
)

// ErrNoKFD is wrapped by Read and ReadProcs when the root holds no KFD
// topology.
var ErrNoKFD = errors.New("no KFD topology")

// NodeDirs are where, under the root, Read looks for the KFD nodes
// directory: a live sysfs, then a capture from `topology/` or `nodes/`.
var NodeDirs = []string{"sys/class/kfd/kfd/topology/nodes", "topology/nodes", "nodes"}

// Values of the kernel's kfd_crat.h.
const (
	linkTypePCIe  = 2      // CRAT_IOLINK_TYPE_PCIEXPRESS
	linkTypeXGMI  = 11     // CRAT_IOLINK_TYPE_XGMI
	flagEnabled   = 1 << 0 // CRAT_IOLINK_FLAGS_ENABLED
	xgmiHopWeight = 15     // KFD_CRAT_XGMI_WEIGHT, the weight of one XGMI hop
)

type node struct {
	id    int
	dir   string
	props Props
	gpu   bool
	// hidden: a GPU the device cgroup denies (readNodeProps).
	hidden bool
	name   string
	links  []kfdLink
	mem    uint64 // VRAM bytes from mem_banks
}

type kfdLink struct {
	path  string
	props Props
	p2p   bool
}

// Read builds a finished model from the KFD topology under fsys: GPU nodes
// in KFD (HIP's) order except those the device cgroup hides, each on the
// NUMA node of its PCIe link to a CPU node. A pair's XGMI io_link (hops
// weight/15) wins over a p2p XGMI path, which wins over PCIe; a GPU
// io_link without the enabled flag is dropped with a warning, unless no
// link sets any flag (older kernels). An unsound hole is an error naming
// the path; no nodes directory gives ErrNoKFD.
func Read(fsys fs.FS, warn topology.Warner) (*topology.Model, error) {
	dir, err := findNodes(fsys)
	if err != nil {
		return nil, err
	}
	nodes, err := loadNodes(fsys, dir, warn)
	if err != nil {
		return nil, err
	}
	return build(fsys, dir, nodes, warn)
}

func findNodes(fsys fs.FS) (string, error) {
	for _, d := range NodeDirs {
		if fi, err := fs.Stat(fsys, d); err == nil && fi.IsDir() {
			return d, nil
		}
	}
	return "", fmt.Errorf("kfd: %w: none of %s found", ErrNoKFD, strings.Join(NodeDirs, ", "))
}

// numericEntries lists the decimal names in dir, sorted; other names go to
// warn. A missing dir gives none.
func numericEntries(fsys fs.FS, dir string, warn topology.Warner) ([]int, error) {
	ents, err := fs.ReadDir(fsys, dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("kfd: %w", err)
	}
	ids := make([]int, 0, len(ents))
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil || n < 0 || strconv.Itoa(n) != e.Name() {
			warn.Warn("kfd: %s: ignoring unexpected entry %q", dir, e.Name())
			continue
		}
		ids = append(ids, n)
	}
	slices.Sort(ids)
	return ids, nil
}

func readProps(fsys fs.FS, p string) (Props, error) {
	data, err := fs.ReadFile(fsys, p)
	if err != nil {
		return nil, fmt.Errorf("kfd: %w", err)
	}
	return parseProps(data, "kfd "+p)
}

// readNodeProps reads the properties of the node in dir; hidden when the
// kernel refuses them with EPERM, as amdkfd does for a GPU the device
// cgroup denies (Slurm's ConstrainDevices=yes): ROCr leaves such a node
// out of its numbering (libhsakmt's topology_sysfs_check_node_supported),
// and so does Read, to match HIP's indices inside the cgroup.
func readNodeProps(fsys fs.FS, dir string) (props Props, hidden bool, err error) {
	props, err = readProps(fsys, path.Join(dir, "properties"))
	if errors.Is(err, fs.ErrPermission) {
		return nil, true, nil
	}
	return props, false, err
}

// readSmall reads a one-line file, trimmed; ok is false when it is absent.
func readSmall(fsys fs.FS, p string) (s string, ok bool, err error) {
	data, err := fs.ReadFile(fsys, p)
	if errors.Is(err, fs.ErrNotExist) {
		return "", false, nil
	} else if err != nil {
		return "", false, fmt.Errorf("kfd: %w", err)
	}
	return strings.TrimSpace(string(data)), true, nil
}

// loadNodes reads every node from a few goroutines (a CPX tree has
// thousands of link files), warning and failing in node order.
func loadNodes(fsys fs.FS, dir string, warn topology.Warner) ([]*node, error) {
	ids, err := numericEntries(fsys, dir, warn)
	if err != nil {
		return nil, err
	}
	for k, id := range ids {
		if id != k && (k == 0 || ids[k-1] != id-1) {
			warn.Warn("kfd: %s: node numbers skip to %d", dir, id)
		}
	}
	nodes := make([]*node, len(ids))
	warns := make([][]string, len(ids))
	err = parallel(len(ids), func(k int) error {
		n := &node{id: ids[k], dir: path.Join(dir, strconv.Itoa(ids[k]))}
		nodes[k] = n
		var err error
		if n.props, n.hidden, err = readNodeProps(fsys, n.dir); err != nil || n.hidden {
			return err
		}
		if n.gpu = n.props["simd_count"] > 0; !n.gpu {
			return nil
		}
		return loadGPU(fsys, n, func(format string, args ...any) {
			warns[k] = append(warns[k], fmt.Sprintf(format, args...))
		})
	})
	for _, w := range slices.Concat(warns...) {
		warn.Warn("%s", w)
	}
	return nodes, err // the caller drops nodes on an error
}

// parallel calls f(0..n-1) from a few goroutines and returns the error of
// the lowest index that failed.
func parallel(n int, f func(i int) error) error {
	errs := make([]error, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := min(n, 2*runtime.GOMAXPROCS(0), 16); w > 0; w-- {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				errs[i] = f(i)
			}
		}()
	}
	wg.Wait()
	return cmp.Or(errs...)
}

func loadGPU(fsys fs.FS, n *node, warn topology.Warner) error {
	var err error
	if n.name, _, err = readSmall(fsys, path.Join(n.dir, "name")); err != nil {
		return err
	}
	for _, kind := range []string{"io_links", "p2p_links", "mem_banks"} {
		d := path.Join(n.dir, kind)
		ids, err := numericEntries(fsys, d, warn)
		if err != nil {
			return err
		}
		for _, id := range ids {
			p := path.Join(d, strconv.Itoa(id), "properties")
			props, err := readProps(fsys, p)
			if err != nil {
				return err
			}
			switch ht := props["heap_type"]; {
			case kind != "mem_banks":
				n.links = append(n.links, kfdLink{path: p, props: props, p2p: kind == "p2p_links"})
			case ht == 1 || ht == 2:
				// VRAM: HSA_HEAPTYPE_FRAME_BUFFER_PUBLIC and _PRIVATE.
				n.mem += props["size_in_bytes"]
			}
		}
	}
	n.mem = cmp.Or(n.mem, n.props["local_mem_size"])
	return nil
}

func build(fsys fs.FS, dir string, nodes []*node, warn topology.Warner) (*topology.Model, error) {
	b := &builder{dir: dir, warn: warn, byID: make(map[int]*node, len(nodes)),
		devOf: map[int]int{}, cpuNUMA: map[int]int{}, best: map[[2]int]candidate{}}
	b.classify(nodes)
	if len(b.gpus) == 0 {
		return nil, topology.NewParseError("kfd "+dir, 0, 0, topology.ErrNoDevices, "")
	}
	numa, err := host.ReadNUMA(fsys) // nil on error
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		warn.Warn("kfd: %v", err)
	}
	b.m = &topology.Model{Source: "sysfs", Vendor: topology.VendorAMD, NUMANodes: numa}
	b.mapNUMA()
	b.devices()
	for i, n := range b.gpus {
		if err := b.gpuLinks(i, n); err != nil {
			return nil, err
		}
	}
	for _, c := range b.best { // Finish sorts them and makes cross-NUMA PCIe SYS
		b.m.Links = append(b.m.Links, c.l)
	}
	seen := map[string]int{}
	for i := range b.m.Devices {
		k := b.m.Devices[i].Key()
		if j, ok := seen[k]; ok {
			warn.Warn("kfd: devices %d and %d have the same identity %s", j, i, k)
			continue
		}
		seen[k] = i
	}
	if err := b.m.Finish(); err != nil {
		return nil, fmt.Errorf("kfd: %w", err)
	}
	return b.m, nil
}

type builder struct {
	dir       string
	warn      topology.Warner
	byID      map[int]*node // KFD node id -> node
	devOf     map[int]int   // KFD GPU node id -> device index
	cpuNUMA   map[int]int   // KFD CPU node id -> its host NUMA node (mapNUMA)
	gpus      []*node       // GPU nodes in device order
	flagsSeen bool          // some GPU link has non-zero flags
	m         *topology.Model
	best      map[[2]int]candidate // the best link found per device pair
}

type candidate struct {
	l    topology.Link
	rank int
}

func (b *builder) classify(nodes []*node) {
	for _, n := range nodes {
		b.byID[n.id] = n
		switch {
		case n.hidden:
			// For this process the GPU does not exist: links to it drop.
		case n.gpu:
			b.devOf[n.id] = len(b.gpus)
			b.gpus = append(b.gpus, n)
			b.flagsSeen = b.flagsSeen || slices.ContainsFunc(n.links, func(l kfdLink) bool { return l.props["flags"] != 0 })
		case n.props["cpu_cores_count"] > 0:
			b.cpuNUMA[n.id] = len(b.cpuNUMA) // its position until mapNUMA
		default:
			b.warn.Warn("kfd: %s: node has neither CPU cores nor SIMDs; ignored", n.dir)
		}
	}
}

// mapNUMA matches KFD CPU nodes to host NUMA nodes: KFD makes one CPU node
// per online NUMA node with CPUs, in order (kfd_create_vcrat_image_cpu).
// Without a match the k-th KFD CPU node is NUMA node k.
func (b *builder) mapNUMA() {
	var withCPUs []int
	for _, h := range b.m.NUMANodes {
		if len(h.CPUs) > 0 {
			withCPUs = append(withCPUs, h.ID)
		}
	}
	if len(b.m.NUMANodes) == 0 {
		return
	}
	if len(withCPUs) != len(b.cpuNUMA) {
		b.warn.Warn("kfd: %d KFD CPU nodes but %d NUMA nodes with CPUs; numbering NUMA nodes by KFD order", len(b.cpuNUMA), len(withCPUs))
		return
	}
	for id, k := range b.cpuNUMA {
		b.cpuNUMA[id] = withCPUs[k]
	}
}

func (b *builder) devices() {
	b.m.Devices = make([]topology.Device, len(b.gpus))
	for i, n := range b.gpus {
		d := &b.m.Devices[i]
		*d = topology.Device{Index: i, RuntimeIndex: i, Vendor: topology.VendorAMD, NUMANode: -1,
			Name: deviceName(n), MemTotalMiB: int64(n.mem >> 20)}
		loc, dom := n.props["location_id"], n.props["domain"]
		if loc != 0 || dom != 0 {
			d.PCIAddress = fmt.Sprintf("%04x:%02x:%02x.%x", dom, (loc>>8)&0xff, (loc>>3)&0x1f, loc&7)
		}
		if u := n.props["unique_id"]; u != 0 {
			d.UniqueID = fmt.Sprintf("0x%x", u)
		}
		if h := n.props["hive_id"]; h != 0 {
			d.Hive = fmt.Sprintf("0x%x", h)
		}
	}
	setPartitions(b.m, b.gpus)
}

// gpuLinks reads GPU node n's links: its first PCIe (else any) link to a
// CPU node gives its NUMA node; links to GPUs are candidates.
func (b *builder) gpuLinks(i int, n *node) error {
	cpuLink := -1 // NUMA node of the chosen link to a CPU node
	cpuLinkPCIe := false
	for _, l := range n.links {
		tn, err := b.target(n, l)
		if err != nil {
			return err
		}
		if numa, isCPU := b.cpuNUMA[tn.id]; isCPU {
			pcie := l.props["type"] == linkTypePCIe
			if cpuLink < 0 || (pcie && !cpuLinkPCIe) {
				cpuLink, cpuLinkPCIe = numa, pcie
			}
			continue
		}
		j, isGPU := b.devOf[tn.id]
		if !isGPU || j == i {
			continue
		}
		if c, ok := b.gpuLink(i, j, n, tn, l); ok {
			k := [2]int{min(i, j), max(i, j)}
			// Higher rank, then more bandwidth, then less weight wins.
			if have, ok := b.best[k]; !ok || cmp.Or(cmp.Compare(c.rank, have.rank),
				cmp.Compare(c.l.MaxBandwidth, have.l.MaxBandwidth), cmp.Compare(have.l.Weight, c.l.Weight)) > 0 {
				b.best[k] = c
			}
		}
	}
	if cpuLink >= 0 {
		b.m.Devices[i].NUMANode = cpuLink
	} else {
		b.warn.Warn("kfd: %s: GPU node has no link to a CPU node; NUMA node unknown", n.dir)
	}
	return nil
}

// target returns the node link l of n leads to, or an error naming l.
func (b *builder) target(n *node, l kfdLink) (*node, error) {
	to, ok := l.props["node_to"]
	if !ok {
		return nil, topology.NewParseError("kfd "+l.path, 0, 0, topology.ErrSyntax, "no node_to")
	}
	tn, ok := b.byID[int(min(to, 1<<30))]
	if !ok {
		return nil, topology.NewParseError("kfd "+l.path, 0, 0, topology.ErrSyntax, "node_to %d: no such node in %s", to, b.dir)
	}
	if from, ok := l.props["node_from"]; ok && from != uint64(n.id) {
		b.warn.Warn("kfd: %s: node_from %d in node %d's directory", l.path, from, n.id)
	}
	return tn, nil
}

// gpuLink makes link l from GPU node n (device i) to tn (device j) a
// candidate ranked XGMI io_link 4, p2p XGMI 3, PCIe io_link 2, p2p PCIe
// 1; ok is false for a disabled io_link or an unknown type.
func (b *builder) gpuLink(i, j int, n, tn *node, l kfdLink) (candidate, bool) {
	if b.flagsSeen && !l.p2p && l.props["flags"]&flagEnabled == 0 {
		b.warn.Warn("kfd: %s: link from node %d to node %d is disabled (flags %d); the pair uses the host path",
			l.path, n.id, tn.id, l.props["flags"])
		return candidate{}, false
	}
	w := int(min(l.props["weight"], 1<<30))
	lk := topology.Link{A: i, B: j, Weight: w,
		MinBandwidth: int64(min(l.props["min_bandwidth"], 1<<40)),
		MaxBandwidth: int64(min(l.props["max_bandwidth"], 1<<40))}
	var rank int
	switch typ := l.props["type"]; typ {
	case linkTypeXGMI:
		lk.Type, lk.Level, lk.Direct = topology.LinkXGMI, "XGMI", true
		lk.Hops = max(1, w/xgmiHopWeight)
		rank = 4
	case linkTypePCIe:
		lk.Type, lk.Level, lk.Hops = topology.LinkPCIe, topology.LevelPHB, 2
		rank = 2
	default:
		b.warn.Warn("kfd: %s: unknown link type %d between GPU nodes %d and %d; ignored", l.path, typ, n.id, tn.id)
		return candidate{}, false
	}
	if l.p2p {
		rank--
	}
	if lk.MaxBandwidth > 0 && lk.MinBandwidth > lk.MaxBandwidth {
		b.warn.Warn("kfd: %s: min_bandwidth %d above max_bandwidth %d; using max", l.path, lk.MinBandwidth, lk.MaxBandwidth)
		lk.MinBandwidth = lk.MaxBandwidth
	}
	return candidate{lk, rank}, true
}

// deviceName is the node's `name`, else (missing, or the placeholder "ip
// discovery") the gfx target, else the PCI device id.
func deviceName(n *node) string {
	if n.name != "" && n.name != "ip discovery" {
		return n.name
	}
	if v := n.props["gfx_target_version"]; v != 0 {
		return GFXName(v)
	}
	if id := n.props["device_id"]; id != 0 {
		return fmt.Sprintf("AMD GPU 0x%04x", id)
	}
	return n.name
}

// GFXName turns a KFD gfx_target_version (major*10000 + minor*100 +
// stepping) into the LLVM target name: 90010 is "gfx90a".
func GFXName(v uint64) string {
	return fmt.Sprintf("gfx%d%d%x", v/10000, v/100%100, v%100)
}

// setPartitions makes GPU nodes sharing a unique_id one Package, numbered
// by location_id.
func setPartitions(m *topology.Model, gpus []*node) {
	groups := map[uint64][]int{}
	for i, n := range gpus {
		if u := n.props["unique_id"]; u != 0 {
			groups[u] = append(groups[u], i)
		}
	}
	for _, g := range groups {
		if len(g) < 2 {
			continue
		}
		slices.SortStableFunc(g, func(a, b int) int { return cmp.Compare(gpus[a].props["location_id"], gpus[b].props["location_id"]) })
		for pos, i := range g {
			m.Devices[i].Package = m.Devices[i].UniqueID
			m.Devices[i].Partition = pos
		}
	}
}
