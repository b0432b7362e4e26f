// Package host reads the host's NUMA layout from sysfs under a root the
// caller chooses.
package host

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"

	"github.com/amdrun/amdrun/internal/topology"
)

// ErrNotSupported is returned by NUMANodes on systems other than Linux.
var ErrNotSupported = errors.New("not supported on this system")

// DeviceNUMA reads the NUMA node (-1: none given) and local CPUs (nil
// without local_cpulist) of the PCI device at pciAddress under fsys.
func DeviceNUMA(fsys fs.FS, pciAddress string) (node int, cpus []int, err error) {
	addr := strings.ToLower(strings.TrimSpace(pciAddress))
	if addr == "" || strings.ContainsAny(addr, "/\\") || addr == "." || addr == ".." {
		return -1, nil, fmt.Errorf("host: bad PCI address %q", pciAddress)
	}
	dir := path.Join("sys/bus/pci/devices", addr)
	p := path.Join(dir, "numa_node")
	data, err := fs.ReadFile(fsys, p)
	if err != nil {
		return -1, nil, fmt.Errorf("host: PCI device %s: %w", addr, err)
	}
	s := strings.TrimSpace(string(data))
	node, err = strconv.Atoi(s)
	if err != nil || node < -1 {
		return -1, nil, topology.NewParseError("host "+p, 1, 0, topology.ErrBadNumber, "numa_node %q", s)
	}
	p = path.Join(dir, "local_cpulist")
	data, err = fs.ReadFile(fsys, p)
	if errors.Is(err, fs.ErrNotExist) {
		return node, nil, nil
	} else if err != nil {
		return -1, nil, fmt.Errorf("host: %w", err)
	}
	cpus, err = topology.ParseCPUList(string(data))
	if err != nil {
		return -1, nil, topology.NewParseError("host "+p, 1, 0, topology.ErrSyntax, "%v", err)
	}
	return node, cpus, nil
}

// PossibleCPUs reads the CPUs the kernel can ever bring online under fsys.
func PossibleCPUs(fsys fs.FS) ([]int, error) {
	b, err := fs.ReadFile(fsys, "sys/devices/system/cpu/possible")
	if err != nil {
		return nil, err
	}
	return topology.ParseCPUList(string(b))
}
