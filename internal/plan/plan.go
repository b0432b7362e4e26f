// Package plan turns a choice of devices into a launch plan: each rank's
// torchrun variables, visible-device lists (visible.go), CPU/NUMA binding
// and memory policy, and the one-process plan for torch's agent
// (TorchrunPlan). It is pure but for asking the kernel for a free port:
// no process started, no file opened, no environment read beyond what it
// is given, so a dry run shows exactly what a launch runs.
package plan

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/amdrun/amdrun/internal/envlist"
	"github.com/amdrun/amdrun/internal/topology"
)

// ErrSpec is wrapped by every error of NewPlan: a Spec that cannot be run.
var ErrSpec = errors.New("invalid launch spec")

// DefaultMasterAddr is what a zero Settings.MasterAddr means;
// DefaultMasterPort, torchrun's, is package job's port for a job of
// several nodes that gives none.
const (
	DefaultMasterAddr = "127.0.0.1"
	DefaultMasterPort = 29500
)

// RankVars are the variables a plan may set in a rank's environment: the
// visible devices (ROCR_VISIBLE_DEVICES only read: it decides what the
// others mean), torchrun's rank contract, and defaults set only where the
// user has not. A dry run shows these.
var RankVars = []string{
	"CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER",
	"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE",
	"ROLE_NAME", "ROLE_RANK", "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
	"TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS",
	"TORCHELASTIC_USE_AGENT_STORE", "TORCH_NCCL_ASYNC_ERROR_HANDLING", "NCCL_ASYNC_ERROR_HANDLING",
	"OMP_NUM_THREADS", frBufferVars[0], frBufferVars[1], frDumpOnTimeout,
}

// asyncErrorVars are torch's names for NCCL's async error handling: the
// first since torch 2.2, the second before (2.2 on warns on every rank
// that it is deprecated). A plan sets the first unless the user set
// either, and the second too for torch before 2.2.
var asyncErrorVars = []string{"TORCH_NCCL_ASYNC_ERROR_HANDLING", "NCCL_ASYNC_ERROR_HANDLING"}

// DefaultRole is ROLE_NAME when Spec.Role is empty, as torchrun's --role.
const DefaultRole = "default"

// Spec is everything NewPlan needs.
type Spec struct {
	// TorchVersion is the workers' torch ("": unknown); below 2.2 the plan
	// also sets NCCL_ASYNC_ERROR_HANDLING.
	TorchVersion string
	// Devices are the chosen devices in rank order, local rank i on
	// Devices[i*k : (i+1)*k] (k: DevicesPerRank), none twice; empty only
	// for CPU ranks.
	Devices []topology.Device
	// DevicesPerRank is k above (0: 1); it must divide len(Devices).
	DevicesPerRank int
	// CPURanks is the rank count of a job without devices (0 unless
	// Devices is empty), bound in contiguous blocks of NUMA nodes.
	CPURanks int
	// HostNUMA are the host's NUMA nodes; empty: ranks are not bound (a
	// warning when Bind asks).
	HostNUMA []topology.NUMANode
	// AllowedCPUs are the CPUs amdrun may use; nil: all of HostNUMA's.
	AllowedCPUs []int
	// CPUGroups are the host's sockets and L3 caches for BindSocket and
	// BindCoreComplex; nil: unknown (they bind to NUMA nodes and warn).
	CPUGroups *topology.CPUGroups
	// BusyCPUs are CPUs other amdrun jobs lease, left out by the modes
	// that lease CPUs (too few left: BindNUMA, one warning); nil: none.
	BusyCPUs []int
	// NodeDevices are every host device's index on each NUMA node,
	// ascending: an exclusive rank's share is its devices' slots
	// (share.go). Nil: each node set's free CPUs are split among its ranks.
	NodeDevices map[int][]int
	// CPUsPerRank, above 0, is how many CPUs an exclusive rank takes
	// instead of its share, those beyond it only if free.
	CPUsPerRank int
	// Argv is the worker command (python -u script args...), never run
	// through a shell.
	Argv []string
	// Env is the base environment (KEY=VAL), kept but for what the plan
	// sets.
	Env []string
	// VisibleEnv are every rank's visible-device variables (Mask.Env),
	// ignored when RankVisibleEnv is set.
	VisibleEnv map[string]string
	// RankVisibleEnv, when set, are each local rank's own visible-device
	// variables (several devices per rank, or VirtualLocalRank).
	RankVisibleEnv []map[string]string
	// Bind is the CPU binding; "": BindNUMA on a host of several NUMA
	// nodes, else BindNone.
	Bind BindMode
	// Mem is the memory policy of bound ranks; "": MemNone.
	Mem MemPolicy
	// Settings are the job's settings every rank shares.
	Settings
}

// Settings are the settings every rank of a job shares, declared once:
// job.Options, Spec and Plan embed them and copy them as one value
// (docs/architecture.md, "Where a setting lives").
type Settings struct {
	// NNodes is the number of nodes (0: 1); NodeRank this node's, in
	// 0..NNodes-1.
	NNodes, NodeRank int
	// MasterAddr and MasterPort locate rank 0's store; "":
	// DefaultMasterAddr, 0: a free port NewPlan asks the kernel for.
	MasterAddr string
	MasterPort int
	// RunID is TORCHELASTIC_RUN_ID; "": a fresh NewRunID.
	RunID string
	// Role is ROLE_NAME (torchrun's --role); "": DefaultRole.
	Role string
	// VirtualLocalRank sets LOCAL_RANK=0 in every rank (torchrun's
	// --virtual-local-rank); each rank should see only its own devices.
	VirtualLocalRank bool
	// MaxRestarts is how often a failed group restarts (0: never), as
	// TORCHELASTIC_MAX_RESTARTS and torchrun's --max_restarts say.
	MaxRestarts int
}

// Plan is the computed launch of one node's workers.
type Plan struct {
	// Ranks are the local workers in local-rank order.
	Ranks []Rank
	// Warnings are what the user should know, each once.
	Warnings []string
	// OMPNote says which OMP_NUM_THREADS amdrun set for several ranks
	// ("" otherwise); only a job starting Python ranks prints it.
	OMPNote string
	// WorldSize is NNodes * len(Ranks).
	WorldSize int
	// Settings are the Spec's after their defaults.
	Settings
	// Bound is the binding the ranks got: Spec.Bind after its default,
	// or BindNUMA where BusyCPUs left too few CPUs.
	Bound BindMode
	// LeaseCPUs are every rank's CPUs when Bound LeasesCPUs; else nil.
	LeaseCPUs []int
}

// Rank is one worker of a plan.
type Rank struct {
	// Rank is the global rank, LocalRank the rank on this node.
	Rank, LocalRank int
	// Devices are the rank's devices; nil for a CPU rank.
	Devices []topology.Device
	// Device is the first of Devices; a CPU rank's has Index,
	// RuntimeIndex and NUMANode -1.
	Device topology.Device
	// NUMANodes are the NUMA nodes the rank is bound to, ascending (nil:
	// none); NUMANode the first, or -1.
	NUMANodes []int
	NUMANode  int
	// CPUs are the rank's CPUs; nil: not bound (amdrun's affinity).
	CPUs []int
	// Mems are the NUMA nodes of the memory policy; nil: the default.
	Mems []int
	// MemPolicy is the policy on Mems (MemNone when Mems is nil).
	MemPolicy MemPolicy
	// Argv is the worker command, exactly as run.
	Argv []string
	// Env is the worker's complete environment, KEY=VAL.
	Env []string
}

// Bound says whether the rank needs the bind shim.
func (r *Rank) Bound() bool { return len(r.CPUs) > 0 || len(r.Mems) > 0 }

// DeviceLabel names the rank's devices for people: "3", "0,1,6,7", or
// "cpu" for a rank without a device.
func (r *Rank) DeviceLabel() string {
	if len(r.Devices) == 0 {
		return "cpu"
	}
	return topology.JoinInts(Indices(r.Devices))
}

// Indices are devs' indices (Device.Index), in order; [] for none.
func Indices(devs []topology.Device) []int {
	idx := make([]int, len(devs))
	for i, d := range devs {
		idx[i] = d.Index
	}
	return idx
}

// cpuDevice is Rank.Device of a rank without a device.
var cpuDevice = topology.Device{Index: -1, RuntimeIndex: -1, NUMANode: -1}

// NewPlan computes the plan for s. It returns an error wrapping ErrSpec
// when s has neither devices nor CPU ranks (or both), no command, a
// device twice, or a device count that DevicesPerRank does not divide;
// the settings' ranges are the caller's to check.
func NewPlan(s Spec) (*Plan, error) {
	v, err := resolveSpec(s)
	if err != nil {
		return nil, err
	}
	p := &Plan{WorldSize: v.NNodes * v.nproc, Settings: v.Settings, Bound: v.bind}
	groups := make([][]topology.Device, v.nproc)
	var homes []home
	if len(s.Devices) == 0 {
		homes = cpuHomes(v.nproc, s.HostNUMA, s.AllowedCPUs, v.bind)
	} else {
		for lr := range groups {
			groups[lr] = s.Devices[lr*v.per : (lr+1)*v.per]
		}
		homes = deviceHomes(groups)
	}
	binds, bound := bindRanks(homes, s, v.bind, &p.Warnings)
	p.Bound = bound
	if bound.LeasesCPUs() {
		for _, b := range binds {
			p.LeaseCPUs = append(p.LeaseCPUs, b.cpus...)
		}
		p.LeaseCPUs = UsableCPUs(nil, p.LeaseCPUs)
	}
	allowed := UsableCPUs(s.HostNUMA, s.AllowedCPUs)

	_, ompSet := envlist.Lookup(s.Env, "OMP_NUM_THREADS")
	var omp []int // each rank's OMP_NUM_THREADS, when amdrun sets it
	for lr, devs := range groups {
		r := newRank(s, v, lr, devs, binds[lr])
		set := rankVars(s, v, p, r)
		if !ompSet {
			n := ompThreads(binds[lr], binds, len(allowed), v.nproc)
			set["OMP_NUM_THREADS"] = strconv.Itoa(n)
			omp = append(omp, n)
		}
		r.Env = mergeEnv(s.Env, set)
		p.Ranks = append(p.Ranks, r)
	}
	if len(omp) > 1 {
		p.OMPNote = ompNote(p.Ranks, omp)
	}
	return p, nil
}

// resolved are a Spec's settings with their defaults filled in.
type resolved struct {
	per, nproc int
	bind       BindMode
	mem        MemPolicy
	Settings
}

// resolveSpec checks s and fills in its defaults.
func resolveSpec(s Spec) (resolved, error) {
	v := resolved{per: s.DevicesPerRank, bind: s.Bind, mem: s.Mem, Settings: s.Settings}
	if err := checkRanks(s); err != nil {
		return v, err
	}
	v.per = cmp.Or(v.per, 1)
	if v.per < 0 || len(s.Devices)%v.per != 0 {
		return v, fmt.Errorf("launch: %w: %d devices do not split into ranks of %d", ErrSpec, len(s.Devices), s.DevicesPerRank)
	}
	v.nproc = s.CPURanks
	if len(s.Devices) > 0 {
		v.nproc = len(s.Devices) / v.per
	}
	if s.RankVisibleEnv != nil && len(s.RankVisibleEnv) != v.nproc {
		return v, fmt.Errorf("launch: %w: visible devices for %d ranks, the plan has %d", ErrSpec, len(s.RankVisibleEnv), v.nproc)
	}
	v.bind, v.mem = cmp.Or(v.bind, BindNone), cmp.Or(v.mem, MemNone)
	if s.Bind == "" && len(s.HostNUMA) > 1 {
		v.bind = BindNUMA
	}
	v.NNodes = cmp.Or(v.NNodes, 1)
	if v.MasterPort == 0 {
		var err error
		if v.MasterPort, err = freePort(); err != nil {
			return v, fmt.Errorf("cannot find a free port for MASTER_PORT (give --master-port): %w", err)
		}
	}
	if v.RunID == "" {
		v.RunID = NewRunID()
	}
	v.MasterAddr, v.Role = cmp.Or(v.MasterAddr, DefaultMasterAddr), cmp.Or(v.Role, DefaultRole)
	return v, nil
}

func checkRanks(s Spec) error {
	switch {
	case len(s.Devices) == 0 && s.CPURanks <= 0:
		return fmt.Errorf("launch: %w: no devices", ErrSpec)
	case len(s.Devices) > 0 && s.CPURanks != 0:
		return fmt.Errorf("launch: %w: %d devices and %d CPU ranks: a plan has one or the other", ErrSpec, len(s.Devices), s.CPURanks)
	}
	if len(s.Argv) == 0 || s.Argv[0] == "" {
		return fmt.Errorf("launch: %w: no worker command", ErrSpec)
	}
	for i, d := range s.Devices {
		if slices.ContainsFunc(s.Devices[:i], func(e topology.Device) bool { return e.Index == d.Index }) {
			return fmt.Errorf("launch: %w: device %d chosen twice", ErrSpec, d.Index)
		}
	}
	return nil
}

// newRank is local rank lr without its Env.
func newRank(s Spec, v resolved, lr int, devs []topology.Device, b binding) Rank {
	r := Rank{Rank: s.NodeRank*v.nproc + lr, LocalRank: lr, Devices: devs, Device: cpuDevice, NUMANodes: b.nodes, NUMANode: -1,
		CPUs: b.cpus, MemPolicy: MemNone, Argv: append([]string(nil), s.Argv...)}
	if len(devs) > 0 {
		r.Device = devs[0]
	}
	if len(b.nodes) > 0 {
		r.NUMANode = b.nodes[0]
		if v.mem != MemNone {
			r.Mems, r.MemPolicy = append([]int(nil), b.nodes...), v.mem
		}
	}
	return r
}

// rankVars are the variables the plan sets for rank r but
// OMP_NUM_THREADS.
func rankVars(s Spec, v resolved, p *Plan, r Rank) map[string]string {
	localRank := r.LocalRank
	if s.VirtualLocalRank {
		localRank = 0
	}
	set := map[string]string{
		"RANK":                         strconv.Itoa(r.Rank),
		"LOCAL_RANK":                   strconv.Itoa(localRank),
		"WORLD_SIZE":                   strconv.Itoa(p.WorldSize),
		"LOCAL_WORLD_SIZE":             strconv.Itoa(v.nproc),
		"GROUP_RANK":                   strconv.Itoa(s.NodeRank),
		"GROUP_WORLD_SIZE":             strconv.Itoa(v.NNodes),
		"ROLE_NAME":                    v.Role,
		"ROLE_RANK":                    strconv.Itoa(r.Rank),
		"ROLE_WORLD_SIZE":              strconv.Itoa(p.WorldSize),
		"MASTER_ADDR":                  v.MasterAddr,
		"MASTER_PORT":                  strconv.Itoa(v.MasterPort),
		"TORCHELASTIC_RUN_ID":          v.RunID,
		"TORCHELASTIC_RESTART_COUNT":   "0",
		"TORCHELASTIC_MAX_RESTARTS":    strconv.Itoa(s.MaxRestarts),
		"TORCHELASTIC_USE_AGENT_STORE": "False",
	}
	if !slices.ContainsFunc(asyncErrorVars, func(k string) bool { _, ok := envlist.Lookup(s.Env, k); return ok }) {
		set[asyncErrorVars[0]] = "1"
		if legacyAsyncName(s.TorchVersion) {
			set[asyncErrorVars[1]] = "1"
		}
	}
	maps.Copy(set, flightRecorderVars(s.TorchVersion, s.Env))
	if len(r.Devices) > 0 {
		visible := s.VisibleEnv
		if s.RankVisibleEnv != nil {
			visible = s.RankVisibleEnv[r.LocalRank]
		}
		maps.Copy(set, visible)
	}
	return set
}

// ompNote says which OMP_NUM_THREADS amdrun set for each rank.
func ompNote(ranks []Rank, omp []int) string {
	notes := make([]string, len(omp))
	for i, n := range omp {
		notes[i] = fmt.Sprintf("rank %d: %d", ranks[i].Rank, n)
	}
	detail := strings.Join(notes, ", ")
	if !slices.ContainsFunc(omp, func(n int) bool { return n != omp[0] }) {
		detail = fmt.Sprintf("%d for every rank", omp[0])
	}
	return "OMP_NUM_THREADS is not set: setting it per rank to its share of its CPUs (" + detail + "); set it to override"
}

// mergeEnv returns base with set's variables replacing theirs in place
// (later duplicates dropped) and the rest appended in key order.
func mergeEnv(base []string, set map[string]string) []string {
	out := make([]string, 0, len(base)+len(set))
	done := map[string]bool{}
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if v, ok := set[k]; ok {
			if done[k] {
				continue
			}
			done[k] = true
			out = append(out, k+"="+v)
			continue
		}
		out = append(out, kv)
	}
	for _, k := range slices.Sorted(maps.Keys(set)) {
		if !done[k] {
			out = append(out, k+"="+set[k])
		}
	}
	return out
}

// WithEnv returns a copy of env with key set to val, as mergeEnv sets
// them.
func WithEnv(env []string, key, val string) []string {
	return mergeEnv(env, map[string]string{key: val})
}

// NewRunID returns a fresh TORCHELASTIC_RUN_ID, "amdrun-" and 12 hex digits.
func NewRunID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "amdrun-" + hex.EncodeToString(b[:])
}

// freePort is a TCP port of 127.0.0.1 the kernel gave a listener it then
// closed: another process may take it before rank 0 binds it.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
