package runcmd

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/amdrun/amdrun/cmd/amdrun/internal/cmdutil"
	"github.com/amdrun/amdrun/internal/envlist"
	"github.com/amdrun/amdrun/internal/job"
	"github.com/amdrun/amdrun/internal/launch"
	"github.com/amdrun/amdrun/internal/launch/numabalance"
	"github.com/amdrun/amdrun/internal/plan"
	"github.com/amdrun/amdrun/internal/selector"
	"github.com/amdrun/amdrun/internal/topology"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// The flags bind into Options where the value is the setting (a number,
// a path, a switch); a flag whose value job reads only once the whole
// line is known (words, lists, durations, torchrun's options) keeps its
// value in the flag. Each flag job reads is declared on its field of
// job.CommandLine (a job.Arg, which says whether it was given and how
// errors name it), through the helpers of decl: job reads it by field,
// never by name.

// decl declares the launch flags of cmd on the Args of line: one call
// per flag, with its name, default, help and how it is torchrun's.
type decl struct {
	cmd  *cobra.Command
	fl   *pflag.FlagSet
	line *job.CommandLine
}

// arg makes the flag name, just declared, the typed value of its Arg a.
func (d decl) arg(a *job.Arg, name string, t job.Torch) {
	f := d.fl.Lookup(name)
	f.Value = a.Wrap(name, f.Value, t)
}

// intVar declares an int flag bound to p (nil: held by the flag).
func (d decl) intVar(a *job.Arg, p *int, name, short string, def int, help string, t job.Torch) {
	d.fl.IntVarP(orNew(p), name, short, def, help)
	d.arg(a, name, t)
}

// boolVar declares a switch bound to p (nil: held by the flag).
func (d decl) boolVar(a *job.Arg, p *bool, name, short, help string, t job.Torch) {
	d.fl.BoolVarP(orNew(p), name, short, false, help)
	d.arg(a, name, t)
}

// stringVar declares a string flag bound to p (nil: held by the flag).
func (d decl) stringVar(a *job.Arg, p *string, name, short, def, help string, t job.Torch) {
	d.fl.StringVarP(orNew(p), name, short, def, help)
	d.arg(a, name, t)
}

// value declares a flag of the typed value v.
func (d decl) value(a *job.Arg, v pflag.Value, name, short, help string, t job.Torch) {
	d.fl.VarP(v, name, short, help)
	d.arg(a, name, t)
}

// indexList parses a list of device or rank indices, "0,2,4-7".
func indexList(s string) ([]int, error) {
	if strings.TrimSpace(s) == "" {
		return nil, errors.New("empty device list")
	}
	l, err := topology.ParseCPUList(s)
	if err != nil {
		return nil, fmt.Errorf("want indices like 0,2,4-7, got %q", s)
	}
	return l, nil
}

// rankList is indexList where blank means none.
func rankList(s string) ([]int, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	return indexList(s)
}

// enum declares the enum flag e bound to p (nil: held by the flag).
func (d decl) enum(a *job.Arg, p *string, e *cmdutil.Enum, def, usage string, t job.Torch) {
	cmdutil.StringEnumFlag(d.cmd, orNew(p), e, def, usage)
	d.arg(a, e.Name, t)
}

func orNew[T any](p *T) *T {
	if p == nil {
		return new(T)
	}
	return p
}

// addDeviceFlags declares the flags that choose the devices and what a dry run prints.
func addDeviceFlags(d decl, opts *Options) {
	fl, l := d.fl, d.line
	d.intVar(&l.NGPUs, &opts.NGPUs, "ngpus", "n", 0, "number of GPUs on this node, one rank each unless --nproc-per-node says otherwise (default and 0: every free device; in a multi-node Slurm step, the GPUs Slurm gave each node)", job.Own)
	d.enum(&l.NProcPerNode, nil, nprocFlag, "", "ranks on this node: N, %s; with --ngpus, each rank gets ngpus/N devices (default: one rank per device)", job.TorchPET)
	fl.Var(cmdutil.Parsed(&opts.Devices, indexList), "devices", "only choose among these device indices, e.g. 0,2,4-7")
	fl.Var(cmdutil.Parsed(&opts.Exclude, indexList), "exclude", "never choose these device indices, e.g. 3 or 0-1")
	fl.BoolVar(&opts.AllowBusy, "allow-busy", false, "allow devices another process is using")
	cmdutil.EnumVar(d.cmd, &opts.Policy, policyFlag, "tree", selector.PolicyByName, "selection policy: %s")
	fl.IntVar(&opts.SearchWork, "search-work", selector.DefaultWork, "most work (about a thousand search steps a unit) the device search may spend; past it the best set found is used (--explain says how far from proven); the answer depends on it, not on the machine's load")
	fl.DurationVar(&opts.SearchBudget, "search-budget", selector.DefaultBudget, "wall-clock safety cap of the device search; if it fires before --search-work, the set found so far is used and --explain says so")
	cmdutil.EnumVar(d.cmd, &opts.Order, orderFlag, "index", selector.ParseOrder, "rank order: %s")
	d.boolVar(&l.DryRun, &opts.DryRun, "dry-run", "", "print the plan (devices, per-rank NUMA node, CPUs and command) and exit without starting anything", job.Own)
	fl.BoolVar(&opts.Explain, "explain", false, "explain the choice: score terms, the next best sets, and the naive first-N pick")
	fl.BoolVar(&opts.JSON, "json", false, "with --dry-run: print the plan as JSON")
}

// addRankFlags declares the flags of what each rank runs, its binding, and how the ranks are supervised.
func addRankFlags(d decl, opts *Options) {
	fl, l := d.fl, d.line
	d.boolVar(&l.Module, &opts.Module, "module", "m", "run SCRIPT as a Python module (python -m MODULE)", job.TorchPET)
	d.boolVar(&l.NoPython, &opts.NoPython, "no-python", "", "run SCRIPT directly as a program, not through Python", job.TorchPET)
	d.stringVar(&l.Python, &opts.Python, "python", "", "", "Python interpreter (default $PYTHON_EXEC, else the active environment's: $VIRTUAL_ENV/bin/python, $CONDA_PREFIX/bin/python; else python3 on PATH)", job.Own)
	d.enum(&l.Bind, nil, bindFlag, "", "CPU/memory binding per rank: %s (default numa when the host has more than one NUMA node, else none)", job.Own)
	cmdutil.EnumVar(d.cmd, &opts.Mem, memFlag, "bind", plan.ParseMemPolicy, "memory policy with --bind numa/exclusive: %s")
	fl.IntVar(&opts.CPUsPerRank, "cpus-per-rank", 0, "with --bind exclusive/core-complex: CPUs per rank instead of its share of its NUMA node (the node's CPUs divided by its GPUs); more only if free")
	d.stringVar(&l.Grace, nil, "grace", "", "10s", "after a rank fails, time the others get between SIGTERM and SIGKILL, with a unit (0: SIGKILL at once)", job.Own)
	d.intVar(&l.MaxRestarts, &opts.MaxRestarts, "max-restarts", "", 0, "restart the whole group this many times after a failure", job.TorchPET)
	cmdutil.EnumVar(d.cmd, &opts.Contain, containFlag, "auto", launch.ParseContainment, "how nothing the job starts outlives it: %s")
	d.boolVar(&l.NoPrefix, &opts.NoPrefix, "no-prefix", "", "do not prefix output lines with [rankN]:", job.Own)
	d.stringVar(&l.LogDir, &opts.LogDir, "log-dir", "", "", "write each rank's stdout.log, stderr.log and error.json under `DIR`, as torchrun (in RUN/attempt_K/LOCAL_RANK, RUN being RUNID_XXXXXXXX; every stream, unless -r/-t choose)", job.TorchPET)
	d.value(&l.LocalRanksFilter, cmdutil.Parsed(&opts.RanksFilter, rankList), "local-ranks-filter", "", "show only these local ranks' output on the console, e.g. 0 or 0,3", job.TorchPET)
}

// addJobFlags declares the flags that place this node in the job: nodes, the master, NUMA balancing, leases, the launcher and the rendezvous.
func addJobFlags(d decl, opts *Options, leaseDir *string) {
	fl, l := d.fl, d.line
	d.stringVar(&l.NNodes, nil, "nnodes", "", "1", "number of nodes (one amdrun per node); MIN:MAX with --launcher torchrun", job.TorchPET)
	d.intVar(&l.NodeRank, &opts.NodeRank, "node-rank", "", 0, "this node's rank, 0 to nnodes-1", job.TorchPET)
	d.stringVar(&l.MasterAddr, &opts.MasterAddr, "master-addr", "", "127.0.0.1", "address of the node that hosts rank 0's store", job.TorchPET)
	d.intVar(&l.MasterPort, &opts.MasterPort, "master-port", "", 0, "port of rank 0's store (default: a free port on one node)", job.TorchPET)
	cmdutil.EnumVar(d.cmd, &opts.NUMABalancing, numaBalancingFlag, "keep", numabalance.ParseMode, "set kernel.numa_balancing for the job and restore it after: %s")
	fl.StringVar(leaseDir, "lease-dir", "", "directory of device leases shared by every amdrun on the node (default $AMDRUN_LEASE_DIR, else /run/lock/amdrun)")
	fl.BoolVar(&opts.NoLease, "no-lease", false, "do not take or respect device leases")
	d.stringVar(&l.Wait, nil, "wait", "", "", "when not enough devices are free, wait for them (optionally at most DURATION, e.g. --wait=10m)", job.Own)
	fl.Lookup(l.Wait.Name()).NoOptDefVal = "forever"
	d.enum(&l.Launcher, &opts.Launcher, launcherFlag, "amdrun", "who starts the ranks: %s", job.Own)
	d.stringVar(&l.RdzvBackend, nil, "rdzv-backend", "", "", "static (amdrun's; the default), or c10d/etcd on one node; other rendezvous need --launcher torchrun", job.TorchPET)
	d.stringVar(&l.RdzvEndpoint, nil, "rdzv-endpoint", "", "", "with --rdzv-backend static: HOST:PORT of rank 0's store (as --master-addr/--master-port); else passed to torchrun", job.TorchPET)
	d.stringVar(&l.RdzvID, nil, "rdzv-id", "", "", "the job's id: TORCHELASTIC_RUN_ID (default: a fresh one)", job.TorchPET)
	d.stringVar(&l.RdzvConf, nil, "rdzv-conf", "", "", "with --launcher torchrun: passed to torchrun", job.TorchPET)
}

// torchrun's command line, as torch/distributed/run.py declares it in
// torch 1.13 (underscore spellings only) and in the current release
// (hyphenated spellings with underscore aliases, plus --local-addr,
// --local-ranks-filter, --logs-specs, --event-log-handler,
// --numa-binding, --signals-to-handle, --shutdown-timeout,
// --virtual-local-rank and --duplicate-std{out,err}-filters). amdrun
// takes every one of them, in either spelling: normalizeFlag turns "_"
// into "-", torchrun's PET_* variables are read as torchrun reads them
// (applyPET), and job.Options.Resolve gives each torchrun's meaning.

// addTorchrunFlags declares torchrun's flags that amdrun's own set does
// not already have (--nproc-per-node, --nnodes, --node-rank,
// --master-addr, --master-port, --max-restarts, --module, --no-python,
// --log-dir, --local-ranks-filter and --rdzv-* are declared with the
// rest).
func addTorchrunFlags(d decl, o *Options) {
	l := d.line
	d.boolVar(&l.Standalone, nil, "standalone", "", "one node, rendezvous on a free local port (amdrun's default; as torchrun)", job.TorchPET)
	d.stringVar(&l.Role, &o.Role, "role", "", "", "ROLE_NAME of the ranks (default \"default\")", job.TorchPET)
	d.boolVar(&l.VirtualLocalRank, nil, "virtual-local-rank", "", "every rank sees only its own devices and gets LOCAL_RANK=0", job.TorchPET)
	d.boolVar(&l.RunPath, nil, "run-path", "", "run SCRIPT with the Python interpreter even with --no-python (as torchrun's runpy.run_path)", job.TorchPET)
	d.value(&l.Redirects, cmdutil.Parsed(&o.Redirects, launch.ParseStreams), "redirects", "r", "streams of each rank written only to --log-dir: "+streamHelp()+", or per local rank, e.g. 0:3,1:0", job.TorchPET)
	d.value(&l.Tee, cmdutil.Parsed(&o.Tee, launch.ParseStreams), "tee", "t", "streams of each rank written to --log-dir and the console (values as --redirects)", job.TorchPET)
	d.intVar(&l.ShutdownTimeout, nil, "shutdown-timeout", "", 0, "seconds between SIGTERM and SIGKILL (torchrun's name for --grace)", job.TorchPET)
	d.enum(&l.NUMABinding, nil, numaBindingFlag, "", "torchrun's binding: %s (the others = --bind of that name)", job.TorchName)
	d.value(&l.SignalsToHandle, cmdutil.Parsed(&o.Forward, launch.ParseSignals), "signals-to-handle", "", fmt.Sprintf("signals forwarded to the ranks, e.g. SIGTERM,SIGINT,SIGUSR1 (default %s); %s also stop the job",
		strings.Join(job.ForwardedSignals, ", "), cmdutil.JoinAnd(job.StopSignals)), job.TorchPET)
	d.stringVar(&l.MonitorInterval, nil, "monitor-interval", "", "", "accepted for torchrun: amdrun sees a rank exit at once, there is nothing to poll", job.TorchPET)
	d.enum(&l.StartMethod, nil, startMethodFlag, "", "accepted for torchrun (%s): ranks are programs, started the same way under each", job.TorchPET)
	d.stringVar(&l.EventLogHandler, nil, "event-log-handler", "", "", "passed to torch's agent when it runs the job (amdrun records no torchelastic events)", job.TorchPET)
	d.stringVar(&l.LocalAddr, nil, "local-addr", "", "", "passed to torch's agent when it runs the job (its rendezvous address of this node)", job.TorchPET)
	d.stringVar(&l.LogsSpecs, nil, "logs-specs", "", "", "passed to torch's agent when it runs the job (a torchrun.logs_specs entry point)", job.TorchName)
	d.stringVar(&l.DuplicateStdoutFilters, nil, "duplicate-stdout-filters", "", "", "passed to torch's agent when it runs the job", job.TorchPET)
	d.stringVar(&l.DuplicateStderrFilters, nil, "duplicate-stderr-filters", "", "", "passed to torch's agent when it runs the job", job.TorchPET)
}

// normalizeFlag makes --nproc_per_node the same flag as
// --nproc-per-node, as torchrun accepts both.
func normalizeFlag(_ *pflag.FlagSet, name string) pflag.NormalizedName {
	return pflag.NormalizedName(strings.ReplaceAll(name, "_", "-"))
}

// applyPET sets every flag of fl that torchrun also reads from a PET_*
// variable (job.Arg.PETVar) and that the command line left alone from
// env, the last assignment winning. A boolean flag's variable is a
// number, true when not 0, as torchrun's check_env reads it. The Arg
// records the variable, so that errors name it.
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
		if a.IsBoolFlag() {
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

// ExpandAbbrev rewrites the abbreviated long flags of cmd in args (its
// own and persistent flags, before SCRIPT or "--") into their full names,
// as torchrun's argparse takes them: job.ExpandAbbrev over cmd's flags,
// its ambiguity error a FlagError.
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
