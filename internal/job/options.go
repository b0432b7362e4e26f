// Package job is amdrun's launch pipeline: discover the node, reserve
// devices (or CPU ranks), plan the ranks (Preview) and supervise them
// (Run). Options groups the settings by the stage that reads them
// (docs/architecture.md). Options.Resolve gives the CommandLine its
// meaning, torchrun's where a flag is torchrun's, and refuses what
// cannot run in one line (UsageError).
package job

import (
	"context"
	"io"
	"os"
	"time"

	"github.com/amdrun/amdrun/internal/launch"
	"github.com/amdrun/amdrun/internal/launch/numabalance"
	"github.com/amdrun/amdrun/internal/lease"
	"github.com/amdrun/amdrun/internal/plan"
	"github.com/amdrun/amdrun/internal/selector"
	"github.com/amdrun/amdrun/internal/slurm"
	"github.com/amdrun/amdrun/internal/topology"
)

// Options are everything a launch needs: its dependencies and its
// settings, one embedded struct per stage.
type Options struct {
	Deps
	Selection
	Planning
	Supervision

	// Explain prints why the devices were chosen (Run: to Stderr).
	Explain bool
}

// Deps are what a launch reads and writes outside itself. Stdout,
// Stderr, Topology, Env, Warn, HostNUMA and NumCPU must be set.
type Deps struct {
	// Stdout and Stderr receive the ranks' output and amdrun's messages.
	Stdout, Stderr io.Writer
	// Stdin is local rank 0's input when an *os.File; else /dev/null.
	Stdin io.Reader
	// Topology discovers the node.
	Topology func(context.Context) (*topology.Model, error)
	// Rediscover discovers it again for a queued job; nil: no fresh view.
	Rediscover func(context.Context) (*topology.Model, error)
	// Run runs the torch version probe; nil: the version is unknown.
	Run topology.Runner
	// Env is amdrun's environment, passed on to every rank.
	Env func() []string
	// Executable is amdrun's own binary, for the guards and bind shims.
	Executable func() (string, error)
	// Warn prints a warning line.
	Warn topology.Warner
	// HostNUMA returns this host's NUMA nodes (a saved topology may be
	// another machine's).
	HostNUMA func() ([]topology.NUMANode, error)
	// HostCPUGroups returns the sockets and L3 caches of nodes' CPUs, read
	// only for --bind socket and core-complex; nil: unknown.
	HostCPUGroups func(nodes []topology.NUMANode) (*topology.CPUGroups, error)
	// OwnCPUs returns the CPUs amdrun may use; nil: launch.OwnCPUs.
	OwnCPUs func() []int
	// NumCPU sizes CPU ranks for --nproc-per-node cpu and auto.
	NumCPU func() int
	// Leases opens the node's lease directory, making it when create is
	// set; nil: no CPU leases.
	Leases func(create bool) (*lease.Dir, error)
}

// Selection is how devices are chosen and reserved.
type Selection struct {
	// SourceAuto says the source was auto-detected: a node without GPUs
	// runs CPU ranks instead of failing.
	SourceAuto bool
	// Ranks are this node's ranks as the command line asks them.
	Ranks Ranks
	// Grant is the GPUs the Slurm task was granted here (nil: outside
	// Slurm): it bounds the devices chosen, and a task granted GPUs that
	// finds none fails, unless Ranks.NoGPUOK.
	Grant *slurm.Grant
	// Devices, Exclude, AllowBusy, Order, SearchWork and SearchBudget are
	// selector.Request's Devices (before the user's mask narrows them),
	// Exclude, AllowBusy, Order, Work and Budget; Policy is reserve's.
	Devices, Exclude []int
	AllowBusy        bool
	Order            selector.Order
	SearchWork       int
	SearchBudget     time.Duration
	Policy           selector.Policy
	// NoLease neither takes nor respects device leases.
	NoLease bool
	// Wait is how long to wait for enough free devices: 0 not at all, <0
	// forever.
	Wait time.Duration
}

// Planning is what each rank runs and how it is placed in the job.
type Planning struct {
	// Args are SCRIPT ARGS... (or MODULE or CMD ARGS...); empty only for
	// a preview, whose command reads "-".
	Args []string
	// Module runs Args[0] as a Python module (python -m).
	Module bool
	// NoPython runs Args as a program, not through Python.
	NoPython bool
	// Python is the workers' interpreter, PythonFrom the rule that chose
	// it ("": none said).
	Python, PythonFrom string

	// Bind, Mem and CPUsPerRank are plan.Spec's (zero: its defaults).
	Bind        plan.BindMode
	Mem         plan.MemPolicy
	CPUsPerRank int
	// Settings are the settings every rank shares (plan documents them).
	plan.Settings
	// Slurm is the Slurm allocation amdrun runs in, or nil.
	Slurm *slurm.Job
	// Launcher "torchrun" hands the planned node to torchrun; anything
	// else, amdrun starts the ranks.
	Launcher string
	// ElasticNNodes is torchrun's --nnodes MIN:MAX ("": NNodes).
	ElasticNNodes string
	// Rdzv holds the --rdzv-* settings by name, passed on to torchrun.
	Rdzv map[string]string
	// TorchrunArgs are torchrun's flags passed on (underscore spellings).
	TorchrunArgs []string
	// Agent says torch's elastic agent (python -m torch.distributed.run)
	// runs the job, as its rendezvous needs; false with Launcher
	// "torchrun": the torchrun on PATH.
	Agent bool
}

// Supervision is how the ranks are run, watched and ended.
type Supervision struct {
	// Grace, RestartWait, Forward, PrefixTemplate, Contain, Quiet, LogDir,
	// RanksFilter, Redirects, Tee, StallTimeout and OnStall are
	// launch.RunOptions' (zero: its defaults).
	Grace, RestartWait, StallTimeout time.Duration
	Forward                          []os.Signal
	PrefixTemplate, LogDir           string
	Contain                          launch.Containment
	Quiet                            bool
	RanksFilter                      []int
	Redirects, Tee                   launch.Streams
	OnStall                          launch.StallAction
	// NoPrefix leaves output lines without "[rankN]: " even when several
	// ranks share the console.
	NoPrefix bool
	// NUMABalancing sets kernel.numa_balancing for the job
	// (numabalance.Keep: leave it).
	NUMABalancing numabalance.Mode
	// Root is where /proc and /sys are read (numabalance.Apply's root).
	Root string
}
