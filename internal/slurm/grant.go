package slurm

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/amdrun/amdrun/internal/topology"
)

// ErrGrant is wrapped by Grant.Devices's errors: GPUs Slurm granted
// that the node's devices cannot be matched to.
var ErrGrant = errors.New("GPU grant does not match this node's devices")

// Grant is the GPUs Slurm's gres/gpu plugin granted this task on this
// node (gres_common.c, Slurm 20.11 and later; testdata/slurm/env):
// SLURM_STEP_GPUS (SLURM_JOB_GPUS outside a step) by Slurm's numbering in
// gres.conf order; GPU_DEVICE_ORDINAL as the runtime numbers them, 0 to
// k-1 under a device cgroup (SLURM_STEP_GPUS=7 with GPU_DEVICE_ORDINAL=0),
// else Slurm's numbers again; SLURM_GPUS_ON_NODE how many. The zero Grant,
// and a nil *Grant, grant nothing.
type Grant struct {
	// IDs are SLURM_STEP_GPUS (in a step) or SLURM_JOB_GPUS, Ordinals
	// GPU_DEVICE_ORDINAL, as written (nil: unset); the *Var fields are
	// NAME=VALUE for messages.
	IDs         []int
	IDsVar      string
	Ordinals    []int
	OrdinalsVar string
	// Count is SLURM_GPUS_ON_NODE; 0 when unset.
	Count int
}

// Granted says whether Slurm granted this task any GPU.
func (g *Grant) Granted() bool {
	return g != nil && (len(g.IDs) > 0 || len(g.Ordinals) > 0 || g.Count > 0)
}

// String names the variables the grant was read from, for messages:
// "SLURM_STEP_GPUS=7, GPU_DEVICE_ORDINAL=0".
func (g *Grant) String() string {
	if g == nil {
		return ""
	}
	parts := slices.DeleteFunc([]string{g.IDsVar, g.OrdinalsVar}, func(s string) bool { return s == "" })
	if len(parts) == 0 && g.Count > 0 {
		parts = append(parts, "SLURM_GPUS_ON_NODE="+strconv.Itoa(g.Count))
	}
	return strings.Join(parts, ", ")
}

// Devices returns the indices (Device.Index) of the devices of devs the
// grant names, ascending, or nil when it bounds nothing (no GPU granted,
// or only a count that devs or the user's own mask, masked, meets). devs
// are numbered as the runtime numbers them (RuntimeIndex): the grant is
// GPU_DEVICE_ORDINAL when set, else Slurm's numbers when devs are more
// than granted (no cgroup), else all of devs (a cgroup shows exactly the
// grant). warn, when not nil, is told when a cgroup renumbered the GPUs
// but the source shows them all. An entry naming no device of devs, or a
// count that does not say which of more devices, is an error wrapping
// ErrGrant that names the variable.
func (g *Grant) Devices(devs []topology.Device, masked bool, warn func(format string, args ...any)) ([]int, error) {
	if !g.Granted() {
		return nil, nil
	}
	n := len(devs)
	var ordinals []int
	var label string
	switch {
	case g.Ordinals != nil:
		ordinals, label = g.Ordinals, g.OrdinalsVar
		if warn != nil && len(g.IDs) == len(g.Ordinals) && !slices.Equal(g.IDs, g.Ordinals) && n > len(g.IDs) {
			warn("%s renumbers %s (a device cgroup hides the node's other GPUs from the runtime), but the topology source shows all %d GPUs: NUMA binding and leases may describe other devices than the runtime uses",
				g.OrdinalsVar, g.IDsVar, n)
		}
	case g.IDs != nil && n == len(g.IDs):
		all := make([]int, n)
		for i := range all {
			all[i] = i
		}
		return all, nil
	case g.IDs != nil:
		ordinals, label = g.IDs, g.IDsVar
	default:
		if masked || n <= g.Count {
			return nil, nil
		}
		return nil, fmt.Errorf("slurm: %w: SLURM_GPUS_ON_NODE=%d says how many GPUs this task was granted but not which of the node's %d (SLURM_STEP_GPUS, SLURM_JOB_GPUS and GPU_DEVICE_ORDINAL are unset): name them with CUDA_VISIBLE_DEVICES or --devices",
			ErrGrant, g.Count, n)
	}
	byRuntime := make(map[int]int, n)
	for i, d := range devs {
		byRuntime[d.RuntimeIndex] = i
	}
	out := make([]int, 0, len(ordinals))
	for _, o := range ordinals {
		i, ok := byRuntime[o]
		if !ok {
			return nil, fmt.Errorf("slurm: %w: %s names GPU %d, but this node shows %d GPUs (runtime indices %s)",
				ErrGrant, label, o, n, runtimeList(devs))
		}
		out = append(out, i)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// readGrant reads the grant variables (see Grant); an entry that is not
// a GPU number, or one written twice, is an error wrapping ErrEnv.
func readGrant(vars map[string]string, step bool) (*Grant, error) {
	g := &Grant{}
	name := "SLURM_JOB_GPUS"
	if step {
		name = "SLURM_STEP_GPUS"
	}
	var err error
	if g.IDs, g.IDsVar, err = gpuList(vars, name); err != nil {
		return nil, err
	}
	if g.Ordinals, g.OrdinalsVar, err = gpuList(vars, "GPU_DEVICE_ORDINAL"); err != nil {
		return nil, err
	}
	if v, ok := vars["SLURM_GPUS_ON_NODE"]; ok {
		if g.Count, err = envInt("SLURM_GPUS_ON_NODE", v); err != nil {
			return nil, err
		}
	}
	return g, nil
}

// gpuList parses variable name's GPU numbers ("0,1,2,3"); nil when unset.
func gpuList(vars map[string]string, name string) ([]int, string, error) {
	v := vars[name]
	if strings.TrimSpace(v) == "" {
		return nil, "", nil
	}
	var out []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(f)
		if err != nil || n < 0 || n > maxGPU {
			return nil, "", fmt.Errorf("slurm: %s=%q: want GPU indices such as 0,1: %w", name, v, ErrEnv)
		}
		if slices.Contains(out, n) {
			return nil, "", fmt.Errorf("slurm: %s=%q names GPU %d twice: %w", name, v, n, ErrEnv)
		}
		out = append(out, n)
	}
	return out, name + "=" + v, nil
}

// maxGPU bounds a GPU number: a mangled value is refused.
const maxGPU = 1<<16 - 1

func runtimeList(devs []topology.Device) string {
	idx := make([]int, len(devs))
	for i, d := range devs {
		idx[i] = d.RuntimeIndex
	}
	slices.Sort(idx)
	return topology.FormatCPUList(slices.Compact(idx))
}
