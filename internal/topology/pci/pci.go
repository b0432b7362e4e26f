// Package pci finds NVIDIA and AMD GPUs (display and accelerator
// functions) in sysfs's PCI tree when no vendor tool and no KFD is there,
// with their NUMA node and the PCIe distance between every pair in
// nvidia-smi topo -m's classes; NVLink and XGMI are invisible from PCI.
// Not through ghw's pci package: it drops every device when one function
// lacks a modalias file, and needs the PCI ID database to list devices.
package pci

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/amdrun/amdrun/internal/topology"
	"github.com/amdrun/amdrun/internal/topology/host"
)

// Source is the Model.Source of models built here.
const Source = "pci"

// FabricNote is the warning Read gives when it finds GPUs.
const FabricNote = "pci: NVLink and XGMI links are invisible from the PCI tree; GPU pairs are placed by their PCIe distance only"

const devicesDir = "sys/bus/pci/devices"

// Known GPU vendors and classes.
const (
	vendorAMD        = 0x1002
	vendorNVIDIA     = 0x10de
	classDisplay     = 0x03
	classAccelerator = 0x12
)

type gpu struct {
	addr   string
	vendor uint32
	numa   int
	cpus   []int
	path   []string // from the host bridge down to the device (BridgePath)
}

// Read finds the GPUs under root and returns a finished model, devices in
// PCI address order (CUDA's with CUDA_DEVICE_ORDER=PCI_BUS_ID, and HIP's).
// Devices have no name: parsing the PCI ID database costs 60-70 ms, which
// a launch need not pay (see FillNames). A GPU function whose files do not
// read is left out with a warning.
func Read(root string, warn topology.Warner) (*topology.Model, error) {
	dir := filepath.Join(root, filepath.FromSlash(devicesDir))
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("pci: %w", err)
	}
	fsys := os.DirFS(root)
	var gpus []gpu
	for _, e := range entries {
		if g, ok, err := readGPU(fsys, dir, e.Name(), warn); err != nil {
			warn.Warn("pci: %s left out: %v", e.Name(), err)
		} else if ok {
			gpus = append(gpus, g)
		}
	}
	if len(gpus) == 0 {
		return nil, topology.NewParseError(Source+" "+devicesDir, 0, 0, topology.ErrNoDevices, "")
	}
	slices.SortFunc(gpus, func(a, b gpu) int { return strings.Compare(a.addr, b.addr) })
	m := build(oneVendor(gpus, warn))
	if err := m.Finish(); err != nil {
		return nil, topology.NewParseError(Source, 0, 0, err, "")
	}
	warn.Warn("%s", FabricNote)
	return m, nil
}

// oneVendor keeps the GPUs of the vendor with more (NVIDIA on a tie),
// warning about the others: CUDA and HIP each number only their own
// vendor's devices, so a mixed model would get runtime indices wrong.
func oneVendor(gpus []gpu, warn topology.Warner) []gpu {
	isAMD := func(g gpu) bool { return g.vendor == vendorAMD }
	nv := slices.DeleteFunc(slices.Clone(gpus), isAMD)
	amd := slices.DeleteFunc(slices.Clone(gpus), func(g gpu) bool { return !isAMD(g) })
	if len(nv) == 0 || len(amd) == 0 {
		return gpus
	}
	keep, kept, left, other := nv, "NVIDIA", amd, "AMD"
	if len(amd) > len(nv) {
		keep, kept, left, other = amd, "AMD", nv, "NVIDIA"
	}
	addrs := make([]string, len(left))
	for i, g := range left {
		addrs[i] = g.addr
	}
	warn.Warn("pci: %d %s and %d %s GPUs found; using the %s ones, leaving out %s (CUDA and HIP each number only their own vendor's devices)",
		len(keep), kept, len(left), other, kept, strings.Join(addrs, ", "))
	return keep
}

func build(gpus []gpu) *topology.Model {
	m := &topology.Model{Source: Source, Bandwidth: "theoretical", Vendor: topology.VendorNVIDIA}
	if gpus[0].vendor == vendorAMD {
		m.Vendor = topology.VendorAMD
	}
	for i, g := range gpus {
		m.Devices = append(m.Devices, topology.Device{Index: i, RuntimeIndex: i, Vendor: m.Vendor,
			PCIAddress: g.addr, NUMANode: g.numa, CPUs: g.cpus})
		for j := range i {
			m.Links = append(m.Links, topology.PCIeLink(j, i, Level(gpus[j].path, gpus[i].path, gpus[j].numa, gpus[i].numa)))
		}
	}
	return m
}

// readGPU reads function name; ok is false unless it is a GPU we know.
func readGPU(fsys fs.FS, dir, name string, warn topology.Warner) (g gpu, ok bool, err error) {
	if !validAddress(name) {
		return gpu{}, false, nil
	}
	p := path.Join(devicesDir, name)
	vendor, err := readHex(fsys, p+"/vendor")
	if err != nil || (vendor != vendorAMD && vendor != vendorNVIDIA) {
		return gpu{}, false, err
	}
	class, err := readHex(fsys, p+"/class")
	if err != nil {
		return gpu{}, false, err
	}
	if c := class >> 16; c != classDisplay && c != classAccelerator {
		return gpu{}, false, nil
	}
	g = gpu{addr: name, vendor: vendor, numa: -1}
	n, cpus, err := host.DeviceNUMA(fsys, name)
	switch {
	case err == nil:
		g.numa, g.cpus = n, cpus
	case !errors.Is(err, fs.ErrNotExist): // a kernel without NUMA has no numa_node
		warn.Warn("pci: %s: NUMA node unknown: %v", name, err)
	}
	link, err := os.Readlink(filepath.Join(dir, name))
	if err != nil {
		return gpu{}, false, err
	}
	if g.path, err = BridgePath(link, name); err != nil {
		return gpu{}, false, err
	}
	return g, true, nil
}

var errPath = errors.New("not a PCI device path")

// BridgePath turns the target of a sys/bus/pci/devices link
// ("../../../devices/pci0000:40/0000:40:01.1/0000:41:00.0") into the path
// from the host bridge down to addr: ["pci0000:40", "0000:40:01.1",
// "0000:41:00.0"].
func BridgePath(link, addr string) ([]string, error) {
	parts := strings.Split(filepath.ToSlash(link), "/")
	start := -1 // the last host bridge: a VMD domain nests one under a device
	for i, p := range parts {
		if strings.HasPrefix(p, "pci") && validAddress(strings.TrimPrefix(p, "pci")+":00.0") {
			start = i
		}
	}
	if start < 0 || len(parts)-start < 2 || parts[len(parts)-1] != addr ||
		slices.ContainsFunc(parts[start+1:], func(p string) bool { return !validAddress(p) }) {
		return nil, fmt.Errorf("%w: %q", errPath, link)
	}
	return parts[start:], nil
}

// Level is the nvidia-smi topo -m class of the PCIe path between devices
// with BridgePaths a and b and NUMA nodes na and nb: under different host
// bridges NODE on one NUMA node, else SYS; meeting at the host bridge PHB;
// below it PIX through one switch, else PXB. A nil path is SYS.
func Level(a, b []string, na, nb int) string {
	if len(a) < 2 || len(b) < 2 {
		return topology.LevelSYS
	}
	if a[0] != b[0] {
		if na == nb {
			return topology.LevelNODE
		}
		return topology.LevelSYS
	}
	k := 1
	for k < len(a)-1 && k < len(b)-1 && a[k] == b[k] {
		k++
	}
	if k == 1 {
		return topology.LevelPHB
	}
	// Below the meeting bridge every second bridge on a side is one more
	// switch (an upstream port with its downstream ports).
	switches := 1 + max(0, len(a)-2-k)/2 + max(0, len(b)-2-k)/2
	if switches == 1 {
		return topology.LevelPIX
	}
	return topology.LevelPXB
}

func validAddress(s string) bool {
	n, ok := topology.NormalizePCI(s)
	return ok && n == s
}

// readHex reads a sysfs id file ("0x10de\n").
func readHex(fsys fs.FS, name string) (uint32, error) {
	b, err := fs.ReadFile(fsys, name)
	if err != nil {
		return 0, err
	}
	s := strings.TrimSpace(string(b))
	v, err := strconv.ParseUint(strings.TrimPrefix(s, "0x"), 16, 32)
	if err != nil || !strings.HasPrefix(s, "0x") {
		return 0, topology.NewParseError(Source+" "+name, 1, 0, topology.ErrBadNumber, "%q", s)
	}
	return uint32(v), nil
}
