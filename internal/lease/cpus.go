package lease

import (
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/amdrun/amdrun/internal/printable"
)

// cpuKeyPrefix starts every CPU key ("cpu:N": exclusive and core-complex
// ranks' CPUs, leased like devices); device keys never do.
const cpuKeyPrefix = "cpu:"

// ErrNoCPUFiles: a root-prepared lease directory without CPU lease files.
var ErrNoCPUFiles = errors.New("the lease directory has no CPU lease files (amdrun lease init makes them)")

// CPUKey is the lease key of host CPU c.
func CPUKey(c int) string { return cpuKeyPrefix + strconv.Itoa(c) }

// CPUOfKey returns the CPU of a CPU lease key; false for any other key.
func CPUOfKey(key string) (int, bool) {
	rest, ok := strings.CutPrefix(key, cpuKeyPrefix)
	c, err := strconv.Atoi(rest)
	if !ok || err != nil || c < 0 || strconv.Itoa(c) != rest {
		return 0, false
	}
	return c, true
}

// CPUKeys are the lease keys of cpus, in order.
func CPUKeys(cpus []int) []string {
	keys := make([]string, len(cpus))
	for i, c := range cpus {
		keys[i] = CPUKey(c)
	}
	return keys
}

// HeldCPUs is Held by CPU; ErrNoCPUFiles in a root-prepared directory
// without CPU lease files.
func (d *Dir) HeldCPUs(cpus []int) (map[int]State, error) {
	if err := d.cpuFilesMade(cpus); err != nil {
		return nil, err
	}
	held, err := d.Held(CPUKeys(cpus))
	return byCPU(held), err
}

// AcquireCPUs is Acquire for cpus; call it under Lock, after HeldCPUs.
func (d *Dir) AcquireCPUs(cpus []int) (*Lease, error) {
	if err := d.cpuFilesMade(cpus); err != nil {
		return nil, err
	}
	return d.Acquire(CPUKeys(cpus))
}

func byCPU(held map[string]State) map[int]State {
	out := map[int]State{}
	for k, s := range held {
		if c, ok := CPUOfKey(k); ok {
			out[c] = s
		}
	}
	return out
}

// CPUHolding is the CPUs one holder leases.
type CPUHolding struct {
	CPUs   []int  `json:"cpus"`
	Holder Holder `json:"holder"`
	// Fault is set instead of Holder for CPUs whose lease file cannot be used.
	Fault string `json:"fault,omitempty"`
}

// GroupCPUs groups ListCPUs' answer by holder pid, by first CPU.
func GroupCPUs(held map[int]State) []CPUHolding {
	byPID := map[int]int{}
	var out []CPUHolding
	for _, c := range slices.Sorted(maps.Keys(held)) {
		s := held[c]
		if s.Fault != nil {
			out = append(out, CPUHolding{CPUs: []int{c}, Holder: s.Holder, Fault: printable.String(s.Fault.Error(), 300)})
			continue
		}
		i, ok := byPID[s.Holder.PID]
		if !ok {
			i = len(out)
			byPID[s.Holder.PID] = i
			out = append(out, CPUHolding{Holder: s.Holder})
		}
		out[i].CPUs = append(out[i].CPUs, c)
	}
	return out
}
