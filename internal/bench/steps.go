package bench

import (
	"fmt"
	"strings"

	"github.com/amdrun/amdrun/internal/launch"
	"github.com/amdrun/amdrun/internal/plan"
	"github.com/amdrun/amdrun/internal/topology"
)

// DeviceError is a device to measure that does not exist.
type DeviceError struct{ Device, N int }

func (e *DeviceError) Error() string {
	return fmt.Sprintf("device %d does not exist (%d devices)", e.Device, e.N)
}

// StepsSpec is what Steps needs besides the model.
type StepsSpec struct {
	// Devices are the model indices to measure, in order; nil means all.
	Devices []int
	// Python is the interpreter that runs the probe (with torch).
	Python string
	// SizeMiB and Iters are the copy size and the timed copies per figure.
	SizeMiB, Iters int
	// Env is the probe's environment, without the visible devices.
	Env []string
	// HostNUMA returns the host's NUMA nodes, one host-to-device step
	// each; nil: none.
	HostNUMA func() ([]topology.NUMANode, error)
	// Self returns amdrun's own binary, the host-to-device steps' shim.
	Self func() (string, error)
}

// Steps plans a measurement of m: one device-to-device step, then one
// host-to-device step per NUMA node, and the devices measured; a device
// that does not exist is a *DeviceError.
func Steps(m *topology.Model, s StepsSpec) ([]Step, []int, error) {
	devs := s.Devices
	if devs == nil {
		for i := range m.Devices {
			devs = append(devs, i)
		}
	}
	if len(devs) == 0 {
		return nil, nil, fmt.Errorf("bench: no devices to measure")
	}
	runtime := make([]string, len(devs))
	for i, d := range devs {
		if d < 0 || d >= m.N() {
			return nil, nil, &DeviceError{d, m.N()}
		}
		runtime[i] = fmt.Sprint(m.Devices[d].RuntimeIndex)
	}
	vis := strings.Join(runtime, ",")
	env := append(append([]string(nil), s.Env...), plan.EnvCUDAVisible+"="+vis, plan.EnvHIPVisible+"="+vis)
	if m.Vendor == topology.VendorNVIDIA {
		env = append(env, plan.EnvCUDAOrder+"=PCI_BUS_ID")
	}
	probe := func(mode string) []string {
		return []string{s.Python, "-c", probe, mode, fmt.Sprint(s.SizeMiB), fmt.Sprint(s.Iters)}
	}
	steps := []Step{{Argv: probe("d2d"), Env: env, NUMA: -1, Mode: "d2d"}}
	if s.HostNUMA == nil {
		return steps, devs, nil
	}
	nodes, err := s.HostNUMA()
	if err != nil {
		return nil, nil, fmt.Errorf("bench: host NUMA nodes: %w", err)
	}
	self, err := s.Self()
	if err != nil {
		return nil, nil, err
	}
	for _, n := range nodes {
		if len(n.CPUs) == 0 {
			continue
		}
		argv := launch.ShimArgv(self, n.CPUs, []int{n.ID}, plan.MemBind, probe("h2d"))
		steps = append(steps, Step{Argv: argv, Env: env, NUMA: n.ID, Mode: "h2d"})
	}
	return steps, devs, nil
}
