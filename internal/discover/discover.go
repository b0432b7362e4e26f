package discover

import (
	"cmp"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"syscall"

	"github.com/amdrun/amdrun/internal/topology"
	"github.com/amdrun/amdrun/internal/topology/amdsmi"
	"github.com/amdrun/amdrun/internal/topology/host"
	"github.com/amdrun/amdrun/internal/topology/kfd"
	"github.com/amdrun/amdrun/internal/topology/nvidiasmi"
	"github.com/amdrun/amdrun/internal/topology/pci"
	"github.com/amdrun/amdrun/internal/topology/rocmsmi"
)

// Sources lists the values of --source, in the order auto tries the
// discovering ones.
var Sources = []string{"auto", "sysfs", "amd-smi", "rocm-smi", "nvidia-smi", "pci", "file", "example"}

// ErrUnknownSource is a --source value amdrun does not know.
var ErrUnknownSource = errors.New("unknown source")

// ErrNoGPU says no source found a device.
var ErrNoGPU = errors.New("no GPU found")

//go:embed example/mi250.json
var exampleJSON []byte

// Options says where to look; the zero value tries every source under
// "/".
type Options struct {
	// Source is one of Sources; "" means "auto".
	Source string
	// SysfsRoot is the directory sysfs paths are read under; "" means "/".
	SysfsRoot string
	// File is the saved topology for Source "file" (implied by a File
	// under "auto").
	File string
	// Run runs vendor tools; nil means RunTool with ToolTimeout.
	Run topology.Runner
	// Warn receives recoverable oddities; nil drops them.
	Warn topology.Warner
}

// ValidSource checks a --source value.
func ValidSource(s string) error {
	if s == "" || slices.Contains(Sources, s) {
		return nil
	}
	return fmt.Errorf("%w %q (valid: %s)", ErrUnknownSource, s, strings.Join(Sources, ", "))
}

// Example returns the bundled example topology, the seed document's
// MI250 node.
func Example() (*topology.Model, error) {
	m, err := topology.ReadJSON(strings.NewReader(string(exampleJSON)))
	if err != nil {
		return nil, fmt.Errorf("bundled example: %w", err)
	}
	m.Source = "example (seed MI250 node)"
	return m, nil
}

// Discover returns the node's topology from the chosen source; "auto"
// takes the first of sysfs, amd-smi, rocm-smi, nvidia-smi and pci that
// finds devices, or returns an error wrapping ErrNoGPU with each answer.
func Discover(ctx context.Context, o Options) (*topology.Model, error) {
	if err := ValidSource(o.Source); err != nil {
		return nil, err
	}
	if o.Run == nil {
		o.Run = func(ctx context.Context, name string, args ...string) ([]byte, error) {
			return RunTool(ctx, ToolTimeout, name, args...)
		}
	}
	o.SysfsRoot = cmp.Or(o.SysfsRoot, "/")
	src := cmp.Or(o.Source, "auto")
	if src == "auto" && o.File != "" {
		src = "file"
	}
	switch src {
	case "file": // the root command refuses it without --topology
		return readFile(o.File)
	case "example":
		return Example()
	case "auto":
		var tried []string
		for _, s := range []string{"sysfs", "amd-smi", "rocm-smi", "nvidia-smi", "pci"} {
			m, err := one(ctx, s, o)
			if err == nil {
				return m, nil
			}
			tried = append(tried, fmt.Sprintf("%s: %v", s, err))
		}
		return nil, fmt.Errorf("%w (%s)", ErrNoGPU, strings.Join(tried, "; "))
	default:
		return one(ctx, src, o)
	}
}

func one(ctx context.Context, src string, o Options) (*topology.Model, error) {
	var m *topology.Model
	var err error
	switch src {
	case "sysfs":
		m, err = kfd.Read(kfd.DirFS(o.SysfsRoot), o.Warn)
		if err == nil {
			if perr := kfd.ReadProcs(kfd.DirFS(o.SysfsRoot), m); perr != nil {
				o.Warn.Warn("kfd: process list: %v", perr)
			}
		}
	case "amd-smi":
		m, err = amdsmi.Discover(ctx, o.Run, o.Warn)
	case "rocm-smi":
		m, err = rocmsmi.Discover(ctx, o.Run, o.Warn)
	case "nvidia-smi":
		m, err = nvidiasmi.Discover(ctx, o.Run, o.Warn)
	case "pci":
		m, err = pci.Read(o.SysfsRoot, o.Warn)
	}
	if err != nil {
		return nil, err
	}
	attachHost(m, o)
	return m, nil
}

// attachHost gives the model the host's NUMA nodes and the devices whose
// source did not say their NUMA node from PCI sysfs, and warns of device
// CPU lists outside the host's possible CPUs.
func attachHost(m *topology.Model, o Options) {
	nodes, err := host.NUMANodes(o.SysfsRoot)
	if errors.Is(err, fs.ErrNotExist) {
		// A captured tree (--sysfs-root) often has no host part.
		o.Warn.Warn("no host NUMA information under %s (sys/devices/system/node): device CPU lists unknown", o.SysfsRoot)
		return
	}
	if err != nil {
		o.Warn.Warn("host NUMA nodes: %v", err)
		return
	}
	var fsys fs.FS = os.DirFS(o.SysfsRoot)
	if possible, err := host.PossibleCPUs(fsys); err == nil {
		topology.CheckDeviceCPUs(m, possible, o.Warn)
	}
	for i := range m.Devices {
		d := &m.Devices[i]
		if d.NUMANode >= 0 || d.PCIAddress == "" {
			continue
		}
		if n, cpus, err := host.DeviceNUMA(fsys, d.PCIAddress); err == nil {
			d.NUMANode = n
			if len(d.CPUs) == 0 {
				d.CPUs = cpus
			}
		}
	}
	m.SetNUMANodes(nodes)
}

// readFile reads a saved topology: a regular file (a FIFO would block)
// of at most MaxToolOutput bytes.
func readFile(path string) (*topology.Model, error) {
	// O_NONBLOCK: opening a FIFO must not wait for a writer.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("topology file: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("topology file: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("topology file %s: not a regular file", path)
	}
	if st.Size() > MaxToolOutput {
		return nil, fmt.Errorf("topology file %s: %w", path, ErrTooLarge)
	}
	m, err := topology.ReadJSON(io.LimitReader(f, MaxToolOutput))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}
