// Package job is amdrun's launch pipeline in one place: discover the node,
// reserve devices (select and lease, or CPU ranks where there is no GPU),
// plan the ranks (Preview: the Plan, whose JSON form Document is the
// `--dry-run --json` contract) and supervise them to the end (Run), with
// the torch probe, NUMA balancing and lease hold that go with a launch.
// Options groups the settings by the stage that reads them; nothing copies
// them into another struct before the package that uses them
// (docs/architecture.md lists where each lives; internal/archtest checks).
//
// It also gives the command line its meaning, so that the command only
// declares flags: Options.Resolve reads a CommandLine (an Arg per flag,
// read by field) with torchrun's semantics where a flag is torchrun's, and
// refuses what cannot run in one line (UsageError).
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

// Options are everything a launch needs: its dependencies (the node, the
// environment, the output) and its settings, one struct per stage. The
// stages are embedded, so a setting is named the same everywhere
// (o.Ranks, o.Bind, o.Grace).
type Options struct {
	Deps
	Selection
	Planning
	Supervision

	// Explain prints why the devices were chosen: with Preview, Plan's
	// WriteText does; with Run, to Stderr before the ranks start.
	Explain bool
}

// Deps are what a launch reads and writes outside itself. Nil funcs are
// documented per field; Stdout, Stderr and Topology must be set.
type Deps struct {
	// Stdout and Stderr receive the ranks' output and amdrun's messages.
	Stdout, Stderr io.Writer
	// Stdin is local rank 0's input when it is an *os.File; anything else
	// (nil included) gives every rank /dev/null.
	Stdin io.Reader
	// Topology discovers the node (once; later calls may return the same
	// model).
	Topology func(context.Context) (*topology.Model, error)
	// Rediscover discovers the node again (a queued job's fresh view of
	// busy devices); nil: the first discovery's state is kept.
	Rediscover func(context.Context) (*topology.Model, error)
	// Run runs a program to its end (the torch version probe); nil: the
	// workers' torch version is unknown.
	Run topology.Runner
	// Env is amdrun's environment, passed on to every rank.
	Env func() []string
	// Executable is amdrun's own binary (the guards and bind shims run
	// it); only Run calls it.
	Executable func() (string, error)
	// Warn prints a warning line; it must be set.
	Warn topology.Warner
	// HostNUMA returns this host's NUMA nodes (for binding; a saved
	// topology may describe another machine).
	HostNUMA func() ([]topology.NUMANode, error)
	// HostCPUGroups returns the sockets and level-3 caches of the CPUs of
	// nodes (for --bind socket and core-complex, the only callers: the
	// read costs milliseconds per hundred CPUs); nil means unknown.
	HostCPUGroups func(nodes []topology.NUMANode) (*topology.CPUGroups, error)
	// OwnCPUs returns the CPUs amdrun may use (sched_getaffinity); nil
	// means launch.OwnCPUs. Tests planning on a captured host set it.
	OwnCPUs func() []int
	// NumCPU is the number of CPUs amdrun may use (runtime.NumCPU); it
	// sizes CPU ranks for --nproc-per-node cpu and auto.
	NumCPU func() int
	// Leases opens the node's lease directory, making it when create is
	// set (Preview never creates it).
	Leases func(create bool) (*lease.Dir, error)
}

// Selection is how devices are chosen and reserved.
type Selection struct {
	// SourceAuto says the topology source was left to auto-detection (so
	// a node without GPUs runs CPU ranks instead of failing).
	SourceAuto bool
	// Ranks are this node's ranks as the command line asks them.
	Ranks Ranks
	// Grant is the GPUs the Slurm task was granted on this node (nil:
	// outside Slurm). A grant bounds the devices chosen among, whatever
	// the visible-device variables say; and a task granted GPUs that
	// finds none fails, unless Ranks.NoGPUOK.
	Grant *slurm.Grant
	// Devices are the only devices to choose among (--devices); nil: all.
	Devices []int
	// Exclude are devices never chosen (--exclude); nil: none.
	Exclude []int
	// AllowBusy lets busy devices be chosen.
	AllowBusy bool
	// Policy scores a set (--policy).
	Policy selector.Policy
	// Order is the rank order of the chosen devices (--order).
	Order selector.Order
	// SearchWork and SearchBudget bound the device search by work and by
	// wall-clock time (selector.Request.Work and Budget; zero: their
	// defaults).
	SearchWork   int
	SearchBudget time.Duration
	// NoLease neither takes nor respects device leases.
	NoLease bool
	// Wait is how long to wait for enough free devices: 0 not at all, <0
	// forever.
	Wait time.Duration
}

// Planning is what each rank runs and how it is placed in the job.
type Planning struct {
	// Args are SCRIPT ARGS... (or MODULE ARGS..., or CMD ARGS...); empty
	// only for a preview, whose command then reads "-".
	Args []string
	// Module runs Args[0] as a Python module (python -m).
	Module bool
	// NoPython runs Args as a program, not through Python.
	NoPython bool
	// Python is the workers' interpreter, resolved by the factory's one
	// rule (--python, $PYTHON_EXEC, $VIRTUAL_ENV/bin/python,
	// $CONDA_PREFIX/bin/python, python3); PythonFrom names the rule that
	// chose it ("" says nothing about it).
	Python, PythonFrom string

	// Bind, Mem and CPUsPerRank are plan.Spec's (zero: its defaults).
	Bind        plan.BindMode
	Mem         plan.MemPolicy
	CPUsPerRank int
	// Settings are the job's settings every rank shares, declared once by
	// plan (which documents each field and its zero value).
	plan.Settings
	// Slurm is the Slurm allocation amdrun runs in (Resolve reads it from
	// the environment and fills the four fields above from it), or nil.
	Slurm *slurm.Job
	// Launcher is "torchrun" to hand the planned node to torchrun (amdrun
	// chose the devices and holds their lease); anything else, amdrun
	// starts the ranks itself.
	Launcher string
	// ElasticNNodes is a torchrun --nnodes MIN:MAX range ("" = NNodes).
	ElasticNNodes string
	// Rdzv holds torchrun's --rdzv-* settings by name (backend, endpoint,
	// id, conf), passed on with Launcher "torchrun".
	Rdzv map[string]string
	// TorchrunArgs are torchrun's flags passed on with Launcher
	// "torchrun" (underscore spellings).
	TorchrunArgs []string
	// Agent says the job goes to torch's elastic agent, python -m
	// torch.distributed.run of Python, because its rendezvous needs it
	// (c10d/etcd on several nodes, or --nnodes MIN:MAX); false with
	// Launcher "torchrun" runs the torchrun on PATH.
	Agent bool
}

// Supervision is how the ranks are run, watched and ended.
type Supervision struct {
	// Grace is the time between SIGTERM and SIGKILL after a failure (0:
	// SIGKILL at once).
	Grace time.Duration
	// RestartWait is launch.RunOptions'.
	RestartWait time.Duration
	// Forward are the signals passed to the ranks (--signals-to-handle);
	// nil means launch.DefaultSignals.
	Forward []os.Signal
	// PrefixTemplate is torchrun's TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE
	// for the ranks' console prefixes; "" means "[rankN]: ".
	PrefixTemplate string
	// Contain is how the job's processes are kept from outliving it
	// (ContainAuto: the strongest permitted).
	Contain launch.Containment
	// NoPrefix leaves output lines without "[rankN]: " even when several
	// ranks share the console.
	NoPrefix bool
	// Quiet silences the warnings of the run itself (-q/--quiet).
	Quiet bool
	// LogDir receives torchrun's log layout; "" means a temporary one
	// only when Redirects or Tee ask for files.
	LogDir string
	// RanksFilter lists the local ranks shown on the console; nil: all.
	RanksFilter []int
	// Redirects and Tee are torchrun's -r/--redirects and -t/--tee.
	// Zero: none.
	Redirects, Tee launch.Streams
	// NUMABalancing sets kernel.numa_balancing for the job and restores it
	// after (numabalance.Keep: leave it).
	NUMABalancing numabalance.Mode
	// StallTimeout and OnStall are launch.RunOptions'.
	StallTimeout time.Duration
	OnStall      launch.StallAction
	// Root is the directory /proc and /sys are read (and written, for
	// NUMABalancing) under, as numabalance.Apply takes it.
	Root string
}
