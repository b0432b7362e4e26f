// Package plan turns a choice of devices into a launch plan: each
// rank's RANK/LOCAL_RANK/WORLD_SIZE and rendezvous variables, the
// visible-device lists (the user's CUDA/HIP/ROCR_VISIBLE_DEVICES mask
// read, narrowed and written back: visible.go), the CPU/NUMA binding and
// memory policy (--bind, --mem), and the one-process plan that hands the
// ranks to torch's own agent (TorchrunPlan). It also holds the torch
// version probe's script and parser and the run id.
//
// It is pure but for one question to the kernel, a free port for a Spec
// that gives none: it starts no process, opens no file and reads no
// environment beyond what it is given (the devices, the host's NUMA
// nodes and CPU caches, the environment list, the torch version), so a
// dry run shows exactly what a launch will run. Running a plan is
// package launch's.
package plan

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/amdrun/amdrun/internal/envlist"
	"github.com/amdrun/amdrun/internal/topology"
)

// ErrSpec is wrapped by every error of NewPlan: a Spec that cannot be run.
var ErrSpec = errors.New("invalid launch spec")

// DefaultMasterAddr is what a zero Settings.MasterAddr means;
// DefaultMasterPort, torchrun's, is the port of a job of several nodes
// that gives none (package job decides: a zero MasterPort is a free one).
const (
	DefaultMasterAddr = "127.0.0.1"
	DefaultMasterPort = 29500
)

// RankVars are the variables a plan may set in a rank's environment:
// the visible-device variables, torchrun's rank contract, and defaults
// amdrun sets only when the user has not (OMP_NUM_THREADS,
// TORCH_NCCL_ASYNC_ERROR_HANDLING and its pre-2.2 name
// NCCL_ASYNC_ERROR_HANDLING, torch's flight recorder: FlightRecorder).
// ROCR_VISIBLE_DEVICES is listed because it
// decides what the others mean, though amdrun never sets it. A dry run
// shows these; the torchrun launcher drops the rank contract.
var RankVars = []string{
	"CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER",
	"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE",
	"ROLE_NAME", "ROLE_RANK", "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
	"TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS",
	"TORCHELASTIC_USE_AGENT_STORE", "TORCH_NCCL_ASYNC_ERROR_HANDLING", "NCCL_ASYNC_ERROR_HANDLING",
	"OMP_NUM_THREADS", frBufferVars[0], frBufferVars[1], frDumpOnTimeout,
}

// asyncErrorVars are the two names torch reads for NCCL's asynchronous
// error handling: TORCH_NCCL_ASYNC_ERROR_HANDLING since torch 2.2, the
// other before (torch 1.13 reads only NCCL_ASYNC_ERROR_HANDLING; 2.2 and
// later warn on every rank that it is deprecated). A plan sets the new
// name to 1 unless the user set either, and the old one too when the
// workers' torch is older than 2.2 (Spec.TorchVersion).
var asyncErrorVars = []string{"TORCH_NCCL_ASYNC_ERROR_HANDLING", "NCCL_ASYNC_ERROR_HANDLING"}

// DefaultRole is ROLE_NAME when Spec.Role is empty, as torchrun's --role.
const DefaultRole = "default"

// Spec is everything NewPlan needs. Zero values are documented per field.
type Spec struct {
	// TorchVersion is the version of torch the workers import ("" when
	// unknown): below 2.2 the plan also sets NCCL_ASYNC_ERROR_HANDLING.
	TorchVersion string
	// Devices are the chosen devices in rank order: local rank i runs on
	// Devices[i*k : (i+1)*k], k being DevicesPerRank. No device twice.
	// Empty only for CPU ranks (CPURanks).
	Devices []topology.Device
	// DevicesPerRank is how many devices each rank gets (k above); 0
	// means 1. len(Devices) must be a multiple of it.
	DevicesPerRank int
	// CPURanks is the number of ranks of a job without devices (a node
	// with no GPU): each gets the torchrun environment and no
	// visible-device variable; with BindNUMA or BindExclusive they are
	// spread over the host's NUMA nodes in contiguous blocks. 0 unless
	// Devices is empty.
	CPURanks int
	// HostNUMA are this host's NUMA nodes. Empty: no binding is possible
	// and the plan warns when Bind asks for one.
	HostNUMA []topology.NUMANode
	// AllowedCPUs are the CPUs amdrun itself may use (sched_getaffinity);
	// nil means every CPU of HostNUMA.
	AllowedCPUs []int
	// CPUGroups are the host's sockets and level-3 caches, which
	// BindSocket and BindCoreComplex need; nil: unknown (those modes then
	// bind to NUMA nodes and warn).
	CPUGroups *topology.CPUGroups
	// BusyCPUs are CPUs other amdrun jobs lease (their exclusive or
	// core-complex ranks'); BindExclusive and BindCoreComplex leave them
	// out, and when too few are left the job binds as BindNUMA, with one
	// warning. Nil: none.
	BusyCPUs []int
	// NodeDevices are the indices of every device of the host (chosen
	// or not) on each NUMA node, ascending: an exclusive rank's share of
	// its node's CPUs is its devices' slots among them (share.go). Nil:
	// each node set's free CPUs are split among the job's ranks on it.
	NodeDevices map[int][]int
	// CPUsPerRank, when above 0, is how many CPUs an exclusive rank
	// takes instead of its share: those beyond it only if free.
	CPUsPerRank int
	// Argv is the worker command, already resolved (python -u script
	// args...). It is passed as given, never through a shell.
	Argv []string
	// Env is the base environment (KEY=VAL). It passes through unchanged
	// except for the variables the plan sets.
	Env []string
	// VisibleEnv holds the visible-device variables every rank gets
	// (Mask.Env of all Devices); they override Env. Ignored when
	// RankVisibleEnv is set.
	VisibleEnv map[string]string
	// RankVisibleEnv, when set, holds each local rank's own
	// visible-device variables (Mask.Env of that rank's devices), for
	// ranks that see only their own devices: several devices per rank,
	// or VirtualLocalRank. Its length must be the number of ranks.
	RankVisibleEnv []map[string]string
	// Bind is the CPU binding; "" means BindNUMA on a host of more than
	// one NUMA node (HostNUMA), else BindNone.
	Bind BindMode
	// Mem is the memory policy; "" means MemNone. It applies only to ranks
	// that are bound to NUMA nodes.
	Mem MemPolicy
	// Settings are the job's settings that every rank shares.
	Settings
}

// Settings are the job's settings that every rank of it shares: this
// node's place in the job, its run id and role, the local rank each rank
// is told and the restarts. They are declared here once: job.Options
// holds them (its Planning embeds Settings), and Spec, Plan and Torchrun
// embed them, so a setting is copied as one value, never field by field
// into another struct (docs/architecture.md, "Where a setting lives").
type Settings struct {
	// NNodes is the number of nodes (0 means 1); NodeRank this node's
	// number, 0 <= NodeRank < NNodes.
	NNodes, NodeRank int
	// MasterAddr and MasterPort locate rank 0's store; "" means
	// DefaultMasterAddr, and 0 a free port on this host, which NewPlan
	// asks the kernel for.
	MasterAddr string
	MasterPort int
	// RunID is TORCHELASTIC_RUN_ID; "" means a fresh one (NewRunID),
	// which NewPlan makes.
	RunID string
	// Role is ROLE_NAME (torchrun's --role); "" means DefaultRole.
	Role string
	// VirtualLocalRank sets LOCAL_RANK=0 in every rank, as torchrun's
	// --virtual-local-rank; each rank should then see only its own
	// devices (Spec.RankVisibleEnv), so that device 0 is its own.
	VirtualLocalRank bool
	// MaxRestarts is how often a failed group is restarted (>= 0; 0:
	// never): the ranks see it as TORCHELASTIC_MAX_RESTARTS, launch.Run
	// restarts the group that often (Plan's), and TorchrunPlan passes it
	// as --max_restarts.
	MaxRestarts int
}

// Plan is the computed launch of one node's workers.
type Plan struct {
	// Ranks are the local workers in local-rank order.
	Ranks []Rank
	// Warnings are things the user should know (unbound ranks, a default
	// set on their behalf); each appears once.
	Warnings []string
	// OMPNote says which OMP_NUM_THREADS amdrun set for the ranks, when
	// it set one for more than one rank (torchrun warns then too); ""
	// when the user set it or the node runs one rank. It is not among
	// Warnings: only a job that starts Python ranks prints it.
	OMPNote string
	// WorldSize is NNodes * len(Ranks).
	WorldSize int
	// Settings are the Spec's after their defaults; launch.Run reads
	// MaxRestarts (how often it restarts a failed group; 0 never) and
	// RunID (the log layout's).
	Settings
	// Bound is the binding the ranks got: the Spec's Bind after its
	// default, or BindNUMA where BusyCPUs left too few CPUs for the mode
	// asked.
	Bound BindMode
	// LeaseCPUs are the CPUs the job must lease so that no other amdrun
	// job uses them: every rank's, when Bind LeasesCPUs; nil otherwise.
	LeaseCPUs []int
}

// Rank is one worker of a plan.
type Rank struct {
	// Rank is the global rank (NodeRank*ranks per node + LocalRank);
	// LocalRank the rank on this node.
	Rank, LocalRank int
	// Devices are the rank's devices, in topology order; nil for a CPU
	// rank.
	Devices []topology.Device
	// Device is the rank's first device (the LOCAL_RANK-th visible
	// device when each rank has one); for a CPU rank its Index,
	// RuntimeIndex and NUMANode are -1.
	Device topology.Device
	// NUMANodes are the host NUMA nodes the rank is bound to, ascending;
	// nil if none. NUMANode is the first of them, -1 if none.
	NUMANodes []int
	NUMANode  int
	// CPUs are the CPUs the rank is bound to; nil means not bound (it
	// inherits amdrun's affinity).
	CPUs []int
	// Mems are the NUMA nodes of the rank's memory policy; nil means the
	// default policy.
	Mems []int
	// MemPolicy is the policy applied to Mems (MemNone when Mems is nil).
	// With MemPreferred and several nodes the kernel prefers the first.
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
	idx := make([]int, len(r.Devices))
	for i, d := range r.Devices {
		idx[i] = d.Index
	}
	return topology.JoinInts(idx)
}

// cpuDevice is Rank.Device of a rank without a device.
var cpuDevice = topology.Device{Index: -1, RuntimeIndex: -1, NUMANode: -1}

// NewPlan computes the plan for s. It does no I/O. It returns an error
// wrapping ErrSpec when s has neither devices nor CPU ranks (or both), no
// command, a device twice, or a device count that DevicesPerRank does
// not divide. The settings' ranges and words are the caller's to check
// (job.Options.Resolve refuses them in the user's terms).
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
		p.LeaseCPUs = allowedCPUs(nil, p.LeaseCPUs)
	}
	allowed := allowedCPUs(s.HostNUMA, s.AllowedCPUs)

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

// resolveSpec checks s and fills in its defaults; an impossible Spec is
// ErrSpec.
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

// checkRanks refuses a Spec without ranks, with both devices and CPU
// ranks, without a command, or with a device chosen twice.
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
	seen := map[int]bool{}
	for _, d := range s.Devices {
		if seen[d.Index] {
			return fmt.Errorf("launch: %w: device %d chosen twice", ErrSpec, d.Index)
		}
		seen[d.Index] = true
	}
	return nil
}

// newRank is local rank lr with its devices and binding; its Env is set
// by the caller.
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

// rankVars are the variables the plan sets for rank r (the torchrun
// contract, the async error handling unless the user set it, and the
// rank's visible devices), all but OMP_NUM_THREADS.
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

// ompNote says which OMP_NUM_THREADS amdrun set for each rank (omp,
// by local rank): "1 for every rank" when they agree.
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

// mergeEnv returns base with the variables of set replacing theirs in
// place (later duplicates of a replaced key dropped) and the rest of set
// appended in key order. Nothing else in base changes.
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

// WithEnv returns a copy of env with key set to val, by the rule the plan
// sets each rank's variables with (see mergeEnv); supervision sets the
// per-attempt variables with it.
func WithEnv(env []string, key, val string) []string {
	return mergeEnv(env, map[string]string{key: val})
}
