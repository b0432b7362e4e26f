// Package topology holds amdrun's one model of a node: its GPU devices,
// the link between every pair of them, and the host's NUMA nodes. Sources
// fill a Model; the selector and launcher only read one. The package is
// pure; sub-packages hold one parser per source.
package topology

import (
	"cmp"
	"fmt"
	"slices"
)

// Vendor names the GPU vendor of a node.
type Vendor string

// Vendors amdrun knows.
const (
	VendorAMD    Vendor = "amd"
	VendorNVIDIA Vendor = "nvidia"
)

// LinkType is the kind of path between two devices.
type LinkType string

// Link types. A pair with no direct fabric link talks over PCIe.
const (
	LinkXGMI   LinkType = "xgmi"
	LinkNVLink LinkType = "nvlink"
	LinkPCIe   LinkType = "pcie"
)

// PCIe path levels, in nvidia-smi's vocabulary, closest first; AMD PCIe
// links are LevelPHB unless the source says more.
const (
	LevelPIX  = "PIX"  // at most one PCIe bridge
	LevelPXB  = "PXB"  // several PCIe bridges, no host bridge
	LevelPHB  = "PHB"  // through a PCIe host bridge (the CPU)
	LevelNODE = "NODE" // across host bridges within one NUMA node
	LevelSYS  = "SYS"  // across the SMP interconnect between NUMA nodes
)

// Device is one GPU, or one partition of a GPU, as the runtime sees it.
type Device struct {
	Index int `json:"index"` // the number the vendor tool prints; in a Model, the device's position in Model.Devices
	// RuntimeIndex is the number HIP or CUDA (CUDA_DEVICE_ORDER=PCI_BUS_ID)
	// gives the device when nothing narrows the visible set.
	RuntimeIndex int    `json:"runtime_index"`
	Vendor       Vendor `json:"vendor,omitempty"`
	Name         string `json:"name,omitempty"`
	PCIAddress   string `json:"pci_address,omitempty"` // the PCI bus address in lower case, "0000:0c:00.0", or ""
	UniqueID     string `json:"unique_id,omitempty"`   // AMD unique_id or NVIDIA UUID, shared by partitions; or ""
	// Package groups devices of one physical part (an MI250's two dies,
	// a CPX MI300X's partitions); "" for a package of its own.
	Package   string `json:"package,omitempty"`
	Partition int    `json:"partition,omitempty"` // the device's number within its package (0 if none)
	Hive      string `json:"hive,omitempty"`      // the XGMI hive id, or ""
	NUMANode  int    `json:"numa_node"`           // the host NUMA node closest to the device; -1 if unknown
	CPUs      []int  `json:"cpus,omitempty"`      // the logical CPUs local to the device (nil if unknown)

	MemTotalMiB int64   `json:"mem_total_mib,omitempty"`
	MemUsedMiB  int64   `json:"mem_used_mib,omitempty"`
	MemUsedPct  float64 `json:"mem_used_pct,omitempty"` // the share of memory in use (0-100); <= 0 if unknown
	UtilPercent float64 `json:"util_pct,omitempty"`     // the compute activity (0-100) the tool reported
	Processes   int     `json:"processes,omitempty"`    // the number of processes the tool saw on the device
	Busy        bool    `json:"busy"`                   // another process uses the device (source or BusyRule)
	BusyReason  string  `json:"busy_reason,omitempty"`
}

// Key is a stable identity of the device on this host: the PCI address,
// else the unique id with the partition, else "gpuN".
func (d *Device) Key() string {
	switch {
	case d.PCIAddress != "" && d.Partition == 0:
		return d.PCIAddress
	case d.PCIAddress != "" || d.UniqueID != "":
		return fmt.Sprintf("%s.p%d", cmp.Or(d.PCIAddress, d.UniqueID), d.Partition)
	}
	return fmt.Sprintf("gpu%d", d.Index)
}

// Link is the path between two devices A < B.
type Link struct {
	A    int      `json:"a"`
	B    int      `json:"b"`
	Type LinkType `json:"type"`
	// Level is what the tool printed for the pair ("NV18", "PIX",
	// "XGMI"); "" when it gives no label.
	Level        string `json:"level,omitempty"`
	Count        int    `json:"count,omitempty"` // the number of parallel links (NVLinks, XGMI links), 0 if unknown
	Hops         int    `json:"hops"`
	Weight       int    `json:"weight"`
	MinBandwidth int64  `json:"min_bandwidth_mb_s"`          // MB/s
	MaxBandwidth int64  `json:"max_bandwidth_mb_s"`          // MB/s
	Direct       bool   `json:"direct"`                      // the devices talk without going through the host CPU
	Assumed      bool   `json:"bandwidth_assumed,omitempty"` // the bandwidth is AssumedBandwidth's, not the source's
	Measured     bool   `json:"measured,omitempty"`          // the bandwidth was measured (rocm_bandwidth_test, amdrun bench)
	// P2P says whether the devices can copy peer to peer; unknown (the
	// zero value) counts as available. See Model.BW.
	P2P P2P `json:"p2p,omitempty"`
}

// NUMANode is a host NUMA node and its logical CPUs.
type NUMANode struct {
	ID   int   `json:"id"`
	CPUs []int `json:"cpus"`
}

// Model is one node's topology. Fill the fields, then call Finish: a
// finished Model validates and has exactly one Link per device pair.
type Model struct {
	Source        string `json:"source"` // what filled the model ("sysfs", "rocm-smi", "file")
	SourceVersion string `json:"source_version,omitempty"`
	Vendor        Vendor `json:"vendor,omitempty"`
	Bandwidth     string `json:"bandwidth,omitempty"` // "theoretical" (tool tables, defaults) or "measured"
	// HostBandwidth is the MB/s assumed for pairs that talk through the
	// host; zero means DefaultHostBandwidth.
	HostBandwidth int64      `json:"host_bandwidth_mb_s,omitempty"`
	Devices       []Device   `json:"devices"`
	Links         []Link     `json:"links"`
	NUMANodes     []NUMANode `json:"numa_nodes,omitempty"`

	pair []int32 // n*n -> index into Links, built by Finish
}

// maxCPU is the largest CPU number a model may name (NR_CPUS is 8192).
const maxCPU = 1 << 16

func badCPU(c int) bool { return c < 0 || c > maxCPU }

// MaxDevices bounds a model's size, so that a corrupt input cannot cost
// gigabytes.
const MaxDevices = 1024

// N returns the number of devices.
func (m *Model) N() int { return len(m.Devices) }

// Link returns the link between devices a and b of a finished model, or
// nil for a == b or an index out of range.
func (m *Model) Link(a, b int) *Link {
	n := len(m.Devices)
	if a < 0 || b < 0 || a >= n || b >= n || a == b {
		return nil
	}
	if len(m.pair) != n*n {
		m.index()
	}
	i := m.pair[a*n+b]
	if i < 0 {
		return nil
	}
	return &m.Links[i]
}

// BW returns the max bandwidth in MB/s between a and b (0 for a == b or
// unknown indices); for a P2PUnavailable pair, the HostStaged figure.
func (m *Model) BW(a, b int) int64 {
	if l := m.Link(a, b); l != nil {
		return m.LinkBW(l)
	}
	return 0
}

// LinkBW is BW(l.A, l.B) for one of m's links.
func (m *Model) LinkBW(l *Link) int64 {
	if l.P2P == P2PUnavailable {
		return HostStaged(l.MaxBandwidth, m.HostBandwidth)
	}
	return l.MaxBandwidth
}

// NUMANode returns the host NUMA node with the given id, or nil.
func (m *Model) NUMANode(id int) *NUMANode {
	if i := slices.IndexFunc(m.NUMANodes, func(n NUMANode) bool { return n.ID == id }); i >= 0 {
		return &m.NUMANodes[i]
	}
	return nil
}

func (m *Model) index() {
	n := len(m.Devices)
	m.pair = slices.Repeat([]int32{-1}, n*n)
	for i, l := range m.Links {
		if l.A < 0 || l.B < 0 || l.A >= n || l.B >= n || l.A == l.B {
			continue
		}
		m.pair[l.A*n+l.B] = int32(i)
		m.pair[l.B*n+l.A] = int32(i)
	}
}

// Finish completes and validates a model whose devices are numbered
// 0..N-1: links ordered A < B and sorted, a host link for every missing
// pair, the NUMA rule, assumed bandwidths, NUMA CPU lists and BusyRule.
func (m *Model) Finish() error {
	if err := m.checkDevices(); err != nil {
		return err
	}
	m.HostBandwidth = cmp.Or(max(m.HostBandwidth, 0), DefaultHostBandwidth)
	m.Bandwidth = cmp.Or(m.Bandwidth, "theoretical")
	seen, err := m.finishLinks()
	if err != nil {
		return err
	}
	m.addHostLinks(seen)
	slices.SortFunc(m.Links, func(x, y Link) int { return cmp.Or(cmp.Compare(x.A, y.A), cmp.Compare(x.B, y.B)) })
	m.finishDevices()
	m.index()
	return m.Validate()
}

// finishLinks completes the source's links and returns the pairs covered.
func (m *Model) finishLinks() (map[[2]int]bool, error) {
	n := len(m.Devices)
	seen := make(map[[2]int]bool, len(m.Links))
	for i := range m.Links {
		l := &m.Links[i]
		l.A, l.B = min(l.A, l.B), max(l.A, l.B)
		if l.A < 0 || l.B >= n || l.A == l.B {
			return nil, fmt.Errorf("%w: link %d-%d outside devices 0-%d", ErrInvalidModel, l.A, l.B, n-1)
		}
		if l.MaxBandwidth < 0 || l.MinBandwidth < 0 {
			return nil, fmt.Errorf("%w: link %d-%d has negative bandwidth %d-%d MB/s", ErrInvalidModel, l.A, l.B, l.MinBandwidth, l.MaxBandwidth)
		}
		k := [2]int{l.A, l.B}
		if seen[k] {
			return nil, fmt.Errorf("%w: two links for pair %d-%d", ErrInvalidModel, l.A, l.B)
		}
		seen[k] = true
		l.Assumed = l.Assumed || l.MaxBandwidth <= 0
		m.applyNUMARule(l)
		if l.Assumed {
			l.MaxBandwidth = AssumedBandwidth(l.Type, l.Level, l.Count, m.HostBandwidth)
			l.MinBandwidth = min(l.MinBandwidth, l.MaxBandwidth)
		}
		l.MinBandwidth = cmp.Or(max(l.MinBandwidth, 0), l.MaxBandwidth)
	}
	return seen, nil
}

// addHostLinks gives each pair not seen the host path: PCIe at HostBandwidth.
func (m *Model) addHostLinks(seen map[[2]int]bool) {
	n, bw := len(m.Devices), m.HostBandwidth
	for a := 0; a < n; a++ {
		for b := a + 1; b < n; b++ {
			if seen[[2]int{a, b}] {
				continue
			}
			h := Link{A: a, B: b, Type: LinkPCIe, Level: LevelPHB, Hops: 2, MinBandwidth: bw, MaxBandwidth: bw, Assumed: true}
			m.applyNUMARule(&h)
			m.Links = append(m.Links, h)
		}
	}
}

// finishDevices fills CPU lists, memory percentages and BusyRule.
func (m *Model) finishDevices() {
	m.nodeCPUs()
	for i := range m.Devices {
		d := &m.Devices[i]
		if d.MemUsedPct <= 0 && d.MemTotalMiB > 0 {
			d.MemUsedPct = 100 * float64(d.MemUsedMiB) / float64(d.MemTotalMiB)
		}
		if why := BusyRule(d); !d.Busy && why != "" {
			d.Busy, d.BusyReason = true, why
		}
	}
}

// Validate checks a finished model's invariants (numbering, one link per
// pair with A < B, known types, 0 < min <= max bandwidth, NUMA ids) and
// returns an error wrapping ErrInvalidModel.
func (m *Model) Validate() error {
	n := len(m.Devices)
	if n == 0 {
		return fmt.Errorf("%w: no devices", ErrInvalidModel)
	}
	if err := m.checkDevices(); err != nil {
		return err
	}
	if !slices.Contains([]Vendor{"", VendorAMD, VendorNVIDIA}, m.Vendor) {
		return fmt.Errorf("%w: unknown vendor %q (amd, nvidia)", ErrInvalidModel, m.Vendor)
	}
	runtime := make(map[int]int, n)
	for i, d := range m.Devices {
		if j, dup := runtime[d.RuntimeIndex]; dup {
			// Two ranks would get the same GPU.
			return fmt.Errorf("%w: devices %d and %d have the same runtime index %d", ErrInvalidModel, j, i, d.RuntimeIndex)
		}
		runtime[d.RuntimeIndex] = i
		if k := slices.IndexFunc(d.CPUs, badCPU); k >= 0 {
			return fmt.Errorf("%w: device %d lists CPU %d", ErrInvalidModel, i, d.CPUs[k])
		}
		if d.NUMANode < -1 {
			return fmt.Errorf("%w: device %d has NUMA node %d", ErrInvalidModel, i, d.NUMANode)
		}
		if d.RuntimeIndex < 0 {
			return fmt.Errorf("%w: device %d has runtime index %d", ErrInvalidModel, i, d.RuntimeIndex)
		}
	}
	if want := n * (n - 1) / 2; len(m.Links) != want {
		return fmt.Errorf("%w: %d links for %d devices, want %d", ErrInvalidModel, len(m.Links), n, want)
	}
	seen := make(map[[2]int]bool, len(m.Links))
	for _, l := range m.Links {
		if l.A < 0 || l.B >= n || l.A >= l.B {
			return fmt.Errorf("%w: link %d-%d", ErrInvalidModel, l.A, l.B)
		}
		if seen[[2]int{l.A, l.B}] {
			return fmt.Errorf("%w: two links for pair %d-%d", ErrInvalidModel, l.A, l.B)
		}
		seen[[2]int{l.A, l.B}] = true
		if !slices.Contains([]LinkType{LinkXGMI, LinkNVLink, LinkPCIe}, l.Type) {
			return fmt.Errorf("%w: link %d-%d has unknown type %q", ErrInvalidModel, l.A, l.B, l.Type)
		}
		if l.MaxBandwidth <= 0 || l.MinBandwidth <= 0 || l.MinBandwidth > l.MaxBandwidth {
			return fmt.Errorf("%w: link %d-%d bandwidth %d-%d MB/s", ErrInvalidModel, l.A, l.B, l.MinBandwidth, l.MaxBandwidth)
		}
	}
	ids := map[int]bool{}
	for _, nn := range m.NUMANodes {
		if nn.ID < 0 || ids[nn.ID] {
			return fmt.Errorf("%w: NUMA node id %d", ErrInvalidModel, nn.ID)
		}
		ids[nn.ID] = true
		if k := slices.IndexFunc(nn.CPUs, badCPU); k >= 0 {
			return fmt.Errorf("%w: NUMA node %d lists CPU %d", ErrInvalidModel, nn.ID, nn.CPUs[k])
		}
	}
	return nil
}

func (m *Model) checkDevices() error {
	if n := len(m.Devices); n > MaxDevices {
		return fmt.Errorf("%w: %d devices, more than %d", ErrInvalidModel, n, MaxDevices)
	}
	for i, d := range m.Devices {
		if d.Index != i {
			return fmt.Errorf("%w: device at position %d has index %d", ErrInvalidModel, i, d.Index)
		}
	}
	return nil
}

// BusyMemPct and BusyMemMiB are the memory-use thresholds of BusyRule.
const (
	BusyMemPct = 5.0
	BusyMemMiB = 1024
)

// BusyRule says why a device counts as busy, or "": a process runs on it,
// or at least BusyMemPct percent or BusyMemMiB MiB of its memory is used.
// Compute activity alone does not (a sample can catch a blip).
func BusyRule(d *Device) string {
	switch {
	case d.Processes > 0:
		return fmt.Sprintf("%d process(es)", d.Processes)
	case d.MemUsedMiB >= BusyMemMiB:
		return fmt.Sprintf("%d MiB memory in use", d.MemUsedMiB)
	case d.MemUsedPct >= BusyMemPct:
		return fmt.Sprintf("%.0f%% memory in use", d.MemUsedPct)
	}
	return ""
}

// Packages returns the devices grouped by package, in order of first
// device; a device with no package is a group of its own.
func (m *Model) Packages() [][]int {
	var out [][]int
	at := map[string]int{}
	for _, d := range m.Devices {
		if i, ok := at[d.Package]; ok && d.Package != "" {
			out[i] = append(out[i], d.Index)
			continue
		}
		at[d.Package] = len(out)
		out = append(out, []int{d.Index})
	}
	return out
}

// SetNUMANodes records the host's NUMA nodes, fills devices' empty CPU
// lists from them and applies the cross-NUMA rule again.
func (m *Model) SetNUMANodes(nodes []NUMANode) {
	m.NUMANodes = nodes
	for i := range m.Links {
		m.applyNUMARule(&m.Links[i])
	}
	m.nodeCPUs()
}

func (m *Model) nodeCPUs() {
	for i := range m.Devices {
		d := &m.Devices[i]
		if nn := m.NUMANode(d.NUMANode); len(d.CPUs) == 0 && nn != nil {
			d.CPUs = append([]int(nil), nn.CPUs...)
		}
	}
}

// Keys returns every device's Key, made unique by "#<index>" for a
// repeated one (a broken or copied sysfs tree).
func (m *Model) Keys() []string {
	keys := make([]string, len(m.Devices))
	seen := make(map[string]bool, len(m.Devices))
	for i := range m.Devices {
		k := m.Devices[i].Key()
		if seen[k] {
			k = fmt.Sprintf("%s#%d", k, i)
		}
		seen[k] = true
		keys[i] = k
	}
	return keys
}
