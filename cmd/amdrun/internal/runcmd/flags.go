package runcmd

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/amdrun/amdrun/cmd/amdrun/internal/cmdutil"
	"github.com/amdrun/amdrun/internal/envlist"
	"github.com/amdrun/amdrun/internal/job"
	"github.com/amdrun/amdrun/internal/launch"
	"github.com/amdrun/amdrun/internal/launch/numabalance"
	"github.com/amdrun/amdrun/internal/plan"
	"github.com/amdrun/amdrun/internal/selector"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// decl declares the launch flags of cmd, bound to their typed settings
// in Options (or held by the flag, when job reads them only once the
// whole line is known); a flag job reads is declared on its job.Arg.
type decl struct {
	cmd  *cobra.Command
	fl   *pflag.FlagSet
	line *job.CommandLine
}

// arg makes the flag name, just declared, the value of its Arg a.
func (d decl) arg(a *job.Arg, name string, t job.Torch) {
	f := d.fl.Lookup(name)
	f.Value = d.line.Declare(a, name, f.Value, t, f.Usage)
	if t&job.AgentOnly != 0 {
		f.Usage = agentOnlyHelp + f.Usage
	}
}

// agentOnlyHelp begins the help of a job.AgentOnly flag.
const agentOnlyHelp = "passed to torch's agent when it runs the job; does nothing under amdrun: "

// declare declares a flag with pflag's declare (fl.IntVarP, ...), bound
// to p (nil: held by the flag), on its Arg a.
func declare[T any](d decl, a *job.Arg, declare func(*T, string, string, T, string), p *T, name, short string, def T, help string, t job.Torch) {
	declare(orNew(p), name, short, def, help)
	d.arg(a, name, t)
}

func (d decl) value(a *job.Arg, v pflag.Value, name, short, help string, t job.Torch) {
	d.fl.VarP(v, name, short, help)
	d.arg(a, name, t)
}

// rankList is cmdutil.IndexList where blank means none.
func rankList(s string) ([]int, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	return cmdutil.IndexList(s)
}

// enum declares the enum flag e, bound to p (nil: held by it), on Arg a.
func enum[T any](d decl, a *job.Arg, p *T, e *cmdutil.Enum, def string, parse func(string) (T, error), usage string, t job.Torch) {
	cmdutil.EnumVar(d.cmd, orNew(p), e, def, parse, usage)
	d.arg(a, e.Name, t)
}

// oneOf is the parser of a flag that takes e's words, or nothing.
func oneOf(e *cmdutil.Enum) func(string) (string, error) {
	return func(s string) (string, error) {
		if s != "" && !slices.Contains(e.Values(), s) {
			return "", errors.New("not a word of the flag")
		}
		return s, nil
	}
}

// nprocWord checks --nproc-per-node: a word, a number of ranks or xpu.
func nprocWord(s string) (string, error) {
	v := strings.TrimSpace(s)
	if n, err := strconv.Atoi(v); (err != nil || n < 1) && v != "xpu" {
		return oneOf(nprocFlag)(v)
	}
	return s, nil
}

func orNew[T any](p *T) *T {
	if p == nil {
		return new(T)
	}
	return p
}

// flagTable declares the launch flags, one row (call) per flag in --help's
// order; docs/usage.md's table of them is made from it (TestFlagTableDoc).
var flagTable = []func(decl, *Options){addDeviceFlags, addRankFlags, addJobFlags, addTorchrunFlags}

func addDeviceFlags(d decl, opts *Options) {
	fl, l := d.fl, d.line
	declare(d, &l.NGPUs, d.fl.IntVarP, nil, "ngpus", "n", 0, "number of GPUs on this node, one rank each unless --nproc-per-node says otherwise (default and 0: every free device; in a multi-node Slurm step, the GPUs Slurm gave each node)", job.Own)
	enum(d, &l.NProcPerNode, nil, nprocFlag, "", nprocWord, "ranks on this node: N, %s; with --ngpus, each rank gets ngpus/N devices (default: one rank per device)", job.TorchPET)
	fl.Var(cmdutil.Parsed(&opts.Devices, cmdutil.IndexList), "devices", "only choose among these device indices, e.g. 0,2,4-7")
	fl.Var(cmdutil.Parsed(&opts.Exclude, cmdutil.IndexList), "exclude", "never choose these device indices, e.g. 3 or 0-1")
	fl.BoolVar(&opts.AllowBusy, "allow-busy", false, "allow devices another process is using")
	cmdutil.EnumVar(d.cmd, &opts.Policy, policyFlag, "tree", selector.PolicyByName, "selection policy: %s")
	fl.IntVar(&opts.SearchWork, "search-work", selector.DefaultWork, "most work (about a thousand search steps a unit) the device search may spend beyond 16 candidates (up to 16 it scores every set); past it the best set found is used (--explain says how far from proven); the answer depends on it, not on the machine's load")
	fl.DurationVar(&opts.SearchBudget, "search-budget", selector.DefaultBudget, "wall-clock safety cap of the device search; if it fires before --search-work, the set found so far is used and --explain says so")
	cmdutil.EnumVar(d.cmd, &opts.Order, orderFlag, "index", selector.ParseOrder, "rank order: %s")
	declare(d, &l.DryRun, d.fl.BoolVarP, &opts.DryRun, "dry-run", "", false, "print the plan (devices, per-rank NUMA node, CPUs and command) and exit without starting anything", job.Own)
	fl.BoolVar(&opts.Explain, "explain", false, "explain the choice: score terms, the next best sets, and the naive first-N pick")
	fl.BoolVar(&opts.JSON, "json", false, "with --dry-run: print the plan as JSON")
}

func addRankFlags(d decl, opts *Options) {
	fl, l := d.fl, d.line
	declare(d, &l.Module, d.fl.BoolVarP, &opts.Module, "module", "m", false, "run SCRIPT as a Python module (python -m MODULE)", job.TorchPET)
	declare(d, &l.NoPython, d.fl.BoolVarP, &opts.NoPython, "no-python", "", false, "run SCRIPT directly as a program, not through Python", job.TorchPET)
	declare(d, &l.Python, d.fl.StringVarP, &opts.Python, "python", "", "", "Python interpreter (default $PYTHON_EXEC, else the active environment's: $VIRTUAL_ENV/bin/python, $CONDA_PREFIX/bin/python; else the one amdrun was installed with; else python3 on PATH)", job.Own)
	enum(d, &l.Bind, &opts.Bind, bindFlag, "", plan.ParseBindMode, "CPU/memory binding per rank: %s (default numa when the host has more than one NUMA node, else none)", job.Own)
	cmdutil.EnumVar(d.cmd, &opts.Mem, memFlag, "bind", plan.ParseMemPolicy, "memory policy with --bind numa/exclusive: %s")
	fl.IntVar(&opts.CPUsPerRank, "cpus-per-rank", 0, "with --bind exclusive/core-complex: CPUs per rank instead of its share of its NUMA node (the node's CPUs divided by its GPUs); more only if free")
	declare(d, &l.Grace, d.fl.StringVarP, nil, "grace", "", "10s", "after a rank fails, time the others get between SIGTERM and SIGKILL, with a unit (0: SIGKILL at once)", job.Own)
	declare(d, &l.MaxRestarts, d.fl.IntVarP, &opts.MaxRestarts, "max-restarts", "", 0, "restart the whole group this many times after a failure", job.TorchPET)
	declare(d, &l.RestartWait, d.fl.StringVarP, nil, "restart-wait", "", "30s", "before a restart, wait at most this long until the devices hold no more memory than before the failed attempt (0: do not wait); no restart when they still do", job.Own)
	declare(d, &l.StallTimeout, d.fl.StringVarP, nil, "stall-timeout", "", "auto", "the job is stalled when for this long no rank writes output, touches $AMDRUN_HEARTBEAT or changes its stack (auto: 30m, off when amdrun's output is a terminal; off or 0: never)", job.Own)
	cmdutil.EnumVar(d.cmd, &opts.OnStall, onStallFlag, "report", launch.ParseStallAction, "what a stall does after its report: %s")
	cmdutil.EnumVar(d.cmd, &opts.Contain, containFlag, "auto", launch.ParseContainment, "how nothing the job starts outlives it: %s")
	declare(d, &l.NoPrefix, d.fl.BoolVarP, &opts.NoPrefix, "no-prefix", "", false, "do not prefix output lines with [rankN]:", job.Own)
	declare(d, &l.LogDir, d.fl.StringVarP, &opts.LogDir, "log-dir", "", "", "write each rank's stdout.log, stderr.log and error.json under `DIR`, as torchrun (in RUN/attempt_K/LOCAL_RANK, RUN being RUNID_XXXXXXXX; every stream, unless -r/-t choose)", job.TorchPET|job.Pass)
	d.value(&l.LocalRanksFilter, cmdutil.Parsed(&opts.RanksFilter, rankList), "local-ranks-filter", "", "show only these local ranks' output on the console, e.g. 0 or 0,3", job.TorchPET|job.Pass)
}

func addJobFlags(d decl, opts *Options) {
	fl, l := d.fl, d.line
	declare(d, &l.NNodes, d.fl.StringVarP, nil, "nnodes", "", "1", "number of nodes (one amdrun per node); MIN:MAX with --launcher torchrun", job.TorchPET)
	declare(d, &l.NodeRank, d.fl.IntVarP, &opts.NodeRank, "node-rank", "", 0, "this node's rank, 0 to nnodes-1", job.TorchPET)
	declare(d, &l.MasterAddr, d.fl.StringVarP, &opts.MasterAddr, "master-addr", "", plan.DefaultMasterAddr, "address of the node that hosts rank 0's store", job.TorchPET)
	declare(d, &l.MasterPort, d.fl.IntVarP, &opts.MasterPort, "master-port", "", 0, "port of rank 0's store (default: a free port on one node, 29500 on several)", job.TorchPET)
	cmdutil.EnumVar(d.cmd, &opts.NUMABalancing, numaBalancingFlag, "keep", numabalance.ParseMode, "set kernel.numa_balancing for the job and restore it after: %s")
	fl.StringVar(&opts.LeaseDir, "lease-dir", "", "directory of device leases shared by every amdrun on the node (default $AMDRUN_LEASE_DIR, else /run/lock/amdrun)")
	fl.BoolVar(&opts.NoLease, "no-lease", false, "do not take or respect device leases")
	declare(d, &l.Wait, d.fl.StringVarP, nil, "wait", "", "", "when not enough devices are free, wait for them (optionally at most DURATION, e.g. --wait=10m)", job.Own)
	fl.Lookup(l.Wait.Name()).NoOptDefVal = "forever"
	enum(d, &l.Launcher, &opts.Launcher, launcherFlag, "amdrun", oneOf(launcherFlag), "who starts the ranks: %s", job.Own)
	declare(d, &l.RdzvBackend, d.fl.StringVarP, nil, "rdzv-backend", "", "", "static (amdrun's; the default), or c10d/etcd on one node; other rendezvous need --launcher torchrun", job.TorchPET)
	declare(d, &l.RdzvEndpoint, d.fl.StringVarP, nil, "rdzv-endpoint", "", "", "with --rdzv-backend static: HOST:PORT of rank 0's store (as --master-addr/--master-port); else passed to torchrun", job.TorchPET)
	declare(d, &l.RdzvID, d.fl.StringVarP, nil, "rdzv-id", "", "", "the job's id: TORCHELASTIC_RUN_ID (default: a fresh one)", job.TorchPET)
	declare(d, &l.RdzvConf, d.fl.StringVarP, nil, "rdzv-conf", "", "", "with --launcher torchrun: passed to torchrun", job.TorchPET)
}

// addTorchrunFlags declares the rest of torchrun's command line, as
// torch/distributed/run.py has it from torch 1.13 to the current release.
func addTorchrunFlags(d decl, o *Options) {
	l := d.line
	declare(d, &l.Standalone, d.fl.BoolVarP, nil, "standalone", "", false, "one node, rendezvous on a free local port (amdrun's default; as torchrun)", job.TorchPET)
	declare(d, &l.Role, d.fl.StringVarP, &o.Role, "role", "", "", "ROLE_NAME of the ranks (default \"default\")", job.TorchPET|job.Pass)
	declare(d, &l.VirtualLocalRank, d.fl.BoolVarP, &o.VirtualLocalRank, "virtual-local-rank", "", false, "every rank sees only its own devices and gets LOCAL_RANK=0", job.TorchPET|job.Pass)
	declare(d, &l.RunPath, d.fl.BoolVarP, nil, "run-path", "", false, "run SCRIPT with the Python interpreter even with --no-python (as torchrun's runpy.run_path)", job.TorchPET|job.Pass)
	d.value(&l.Redirects, cmdutil.Parsed(&o.Redirects, launch.ParseStreams), "redirects", "r", "streams of each rank written only to --log-dir: "+streamHelp()+", or per local rank, e.g. 0:3,1:0", job.TorchPET|job.Pass)
	d.value(&l.Tee, cmdutil.Parsed(&o.Tee, launch.ParseStreams), "tee", "t", "streams of each rank written to --log-dir and the console (values as --redirects)", job.TorchPET|job.Pass)
	declare(d, &l.ShutdownTimeout, d.fl.IntVarP, nil, "shutdown-timeout", "", 0, "seconds between SIGTERM and SIGKILL (torchrun's name for --grace)", job.TorchPET|job.Pass)
	enum(d, &l.NUMABinding, nil, numaBindingFlag, "", oneOf(numaBindingFlag), "torchrun's binding: %s (the others = --bind of that name)", job.TorchName|job.Pass|job.NotToAgent)
	d.value(&l.SignalsToHandle, cmdutil.Parsed(&o.Forward, launch.ParseSignals), "signals-to-handle", "", fmt.Sprintf("signals forwarded to the ranks, e.g. SIGTERM,SIGINT,SIGUSR1 (default %s); %s also stop the job",
		strings.Join(launch.ForwardedSignals, ", "), cmdutil.JoinAnd(launch.StopSignals)), job.TorchPET|job.Pass)
	declare(d, &l.MonitorInterval, d.fl.StringVarP, nil, "monitor-interval", "", "", "amdrun sees a rank exit at once, there is nothing to poll (a number of seconds is checked)", job.TorchPET|job.Pass|job.AgentOnly|job.Quiet)
	enum(d, &l.StartMethod, nil, startMethodFlag, "", oneOf(startMethodFlag), "ranks are programs, started the same way under %s (the word is checked)", job.TorchPET|job.Pass|job.AgentOnly|job.Quiet)
	declare(d, &l.EventLogHandler, d.fl.StringVarP, nil, "event-log-handler", "", "null", "it records no torchelastic events", job.TorchPET|job.Pass|job.AgentOnly)
	declare(d, &l.LocalAddr, d.fl.StringVarP, nil, "local-addr", "", "", "it is the address torchrun's rendezvous publishes for this node; amdrun's ranks meet at --master-addr", job.TorchPET|job.Pass|job.AgentOnly)
	declare(d, &l.LogsSpecs, d.fl.StringVarP, nil, "logs-specs", "", "", "it names a Python plugin of torchrun's; --log-dir keeps torchrun's default layout", job.TorchName|job.Pass|job.AgentOnly)
	declare(d, &l.DuplicateStdoutFilters, d.fl.StringVarP, nil, "duplicate-stdout-filters", "", "", "amdrun does not copy matching lines to another file; every line is in the ranks' stdout.log under --log-dir", job.TorchPET|job.Pass|job.AgentOnly)
	declare(d, &l.DuplicateStderrFilters, d.fl.StringVarP, nil, "duplicate-stderr-filters", "", "", "amdrun does not copy matching lines to another file; every line is in the ranks' stderr.log under --log-dir", job.TorchPET|job.Pass|job.AgentOnly)
}

// normalizeFlag makes --nproc_per_node --nproc-per-node, as torchrun.
func normalizeFlag(_ *pflag.FlagSet, name string) pflag.NormalizedName {
	return pflag.NormalizedName(strings.ReplaceAll(name, "_", "-"))
}

// applyPET sets from env each flag of fl that torchrun reads from a PET_*
// variable and the command line left alone (a boolean's variable is a
// number, true when not 0, as torchrun's check_env reads it).
func applyPET(fl *pflag.FlagSet, env []string) error {
	var err error
	fl.VisitAll(func(f *pflag.Flag) {
		a, ok := f.Value.(*job.Arg)
		if !ok || err != nil || a.PETVar() == "" || a.Given() {
			return
		}
		key := a.PETVar()
		v, ok := envlist.Lookup(env, key)
		if !ok {
			return
		}
		if a.Type() == "bool" {
			n, aerr := strconv.Atoi(strings.TrimSpace(v))
			if aerr != nil {
				err = cmdutil.FlagErrorf("%s: want a number (0 off, 1 on, as torchrun reads it), got %q", key, v)
				return
			}
			v = strconv.FormatBool(n != 0)
		}
		if serr := fl.Set(f.Name, v); serr != nil {
			err = cmdutil.ValueError(key, serr)
			return
		}
		a.From(key)
	})
	return err
}

// ExpandAbbrev rewrites cmd's abbreviated long flags in args, as torchrun's
// argparse takes them (job.ExpandAbbrev); an ambiguity is a FlagError.
func ExpandAbbrev(cmd *cobra.Command, args []string) ([]string, error) {
	cmd.InitDefaultHelpFlag()
	cmd.InitDefaultVersionFlag()
	var flags []job.Flag
	add := func(f *pflag.Flag) {
		a, ok := f.Value.(*job.Arg)
		flags = append(flags, job.Flag{Name: f.Name, Shorthand: f.Shorthand, Bare: f.NoOptDefVal != "", Torchrun: ok && a.Torch() != job.Own})
	}
	cmd.Flags().VisitAll(add)
	cmd.PersistentFlags().VisitAll(add)
	out, err := job.ExpandAbbrev(flags, args)
	return out, usageError(err)
}
