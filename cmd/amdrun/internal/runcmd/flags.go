package runcmd

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/amdrun/amdrun/cmd/amdrun/internal/cmdutil"
	"github.com/amdrun/amdrun/internal/job"
	"github.com/amdrun/amdrun/internal/selector"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// The flags bind into Options where the value is the setting (a number,
// a path, a switch); a flag whose text job reads only once the whole line
// is known (words, lists, durations, torchrun's options) keeps its text
// in the flag itself, and Options.Resolve reads it through
// job.CommandLine.Value, so that no struct holds a copy of it.

// addDeviceFlags declares the flags that choose the devices and what a dry run prints.
func addDeviceFlags(cmd *cobra.Command, opts *Options) {
	fl := cmd.Flags()
	fl.IntVarP(&opts.NGPUs, "ngpus", "n", 0, "number of GPUs on this node, one rank each unless --nproc-per-node says otherwise (default and 0: every free device; in a multi-node Slurm step, the GPUs Slurm gave each node)")
	cmdutil.StringEnumFlag(cmd, new(string), nprocFlag, "", "ranks on this node: N, %s; with --ngpus, each rank gets ngpus/N devices (default: one rank per device)")
	fl.String("devices", "", "only choose among these device indices, e.g. 0,2,4-7")
	fl.String("exclude", "", "never choose these device indices, e.g. 3 or 0-1")
	fl.BoolVar(&opts.AllowBusy, "allow-busy", false, "allow devices another process is using")
	cmdutil.StringEnumFlag(cmd, new(string), policyFlag, "tree", "selection policy: %s")
	fl.IntVar(&opts.SearchWork, "search-work", selector.DefaultWork, "most work (about a thousand search steps a unit) the device search may spend beyond 16 candidates (up to 16 it scores every set); past it the best set found is used (--explain says how far from proven); the answer depends on it, not on the machine's load")
	fl.DurationVar(&opts.SearchBudget, "search-budget", selector.DefaultBudget, "wall-clock safety cap of the device search; if it fires before --search-work, the set found so far is used and --explain says so")
	cmdutil.StringEnumFlag(cmd, new(string), orderFlag, "index", "rank order: %s")
	fl.BoolVar(&opts.DryRun, "dry-run", false, "print the plan (devices, per-rank NUMA node, CPUs and command) and exit without starting anything")
	fl.BoolVar(&opts.Explain, "explain", false, "explain the choice: score terms, the next best sets, and the naive first-N pick")
	fl.BoolVar(&opts.JSON, "json", false, "with --dry-run: print the plan as JSON")
}

// addRankFlags declares the flags of what each rank runs, its binding, and how the ranks are supervised.
func addRankFlags(cmd *cobra.Command, opts *Options) {
	fl := cmd.Flags()
	fl.BoolVarP(&opts.Module, "module", "m", false, "run SCRIPT as a Python module (python -m MODULE)")
	fl.BoolVar(&opts.NoPython, "no-python", false, "run SCRIPT directly as a program, not through Python")
	fl.StringVar(&opts.Python, "python", "", "Python interpreter (default $PYTHON_EXEC, else the active environment's: $VIRTUAL_ENV/bin/python, $CONDA_PREFIX/bin/python; else the one amdrun was installed with; else python3 on PATH)")
	cmdutil.StringEnumFlag(cmd, new(string), bindFlag, "", "CPU/memory binding per rank: %s (default numa when the host has more than one NUMA node, else none)")
	cmdutil.StringEnumFlag(cmd, new(string), memFlag, "bind", "memory policy with --bind numa/exclusive: %s")
	fl.IntVar(&opts.CPUsPerRank, "cpus-per-rank", 0, "with --bind exclusive/core-complex: CPUs per rank instead of its share of its NUMA node (the node's CPUs divided by its GPUs); more only if free")
	fl.String("grace", "10s", "after a rank fails, time the others get between SIGTERM and SIGKILL, with a unit (0: SIGKILL at once)")
	fl.IntVar(&opts.MaxRestarts, "max-restarts", 0, "restart the whole group this many times after a failure")
	fl.String("restart-wait", "30s", "before a restart, wait at most this long until the devices hold no more memory than before the failed attempt (0: do not wait); no restart when they still do")
	fl.String("stall-timeout", "auto", "the job is stalled when for this long no rank writes output, touches $AMDRUN_HEARTBEAT or changes its stack (auto: 30m, off when amdrun's output is a terminal; off or 0: never)")
	cmdutil.StringEnumFlag(cmd, new(string), onStallFlag, "report", "what a stall does after its report: %s")
	cmdutil.StringEnumFlag(cmd, new(string), containFlag, "auto", "how nothing the job starts outlives it: %s")
	fl.BoolVar(&opts.NoPrefix, "no-prefix", false, "do not prefix output lines with [rankN]:")
	fl.StringVar(&opts.LogDir, "log-dir", "", "write each rank's stdout.log, stderr.log and error.json under `DIR`, as torchrun (in RUN/attempt_K/LOCAL_RANK, RUN being RUNID_XXXXXXXX; every stream, unless -r/-t choose)")
	fl.String("local-ranks-filter", "", "show only these local ranks' output on the console, e.g. 0 or 0,3")
}

// addJobFlags declares the flags that place this node in the job: nodes, the master, NUMA balancing, leases, the launcher and the rendezvous.
func addJobFlags(cmd *cobra.Command, opts *Options, leaseDir *string) {
	fl := cmd.Flags()
	fl.String("nnodes", "1", "number of nodes (one amdrun per node); MIN:MAX with --launcher torchrun")
	fl.IntVar(&opts.NodeRank, "node-rank", 0, "this node's rank, 0 to nnodes-1")
	fl.StringVar(&opts.MasterAddr, "master-addr", "127.0.0.1", "address of the node that hosts rank 0's store")
	fl.IntVar(&opts.MasterPort, "master-port", 0, "port of rank 0's store (default: a free port on one node)")
	cmdutil.StringEnumFlag(cmd, new(string), numaBalancingFlag, "keep", "set kernel.numa_balancing for the job and restore it after: %s")
	fl.StringVar(leaseDir, "lease-dir", "", "directory of device leases shared by every amdrun on the node (default $AMDRUN_LEASE_DIR, else /run/lock/amdrun)")
	fl.BoolVar(&opts.NoLease, "no-lease", false, "do not take or respect device leases")
	fl.String("wait", "", "when not enough devices are free, wait for them (optionally at most DURATION, e.g. --wait=10m)")
	fl.Lookup("wait").NoOptDefVal = "forever"
	cmdutil.StringEnumFlag(cmd, &opts.Launcher, launcherFlag, "amdrun", "who starts the ranks: %s")
	fl.String("rdzv-backend", "", "static (amdrun's; the default), or c10d/etcd on one node; other rendezvous need --launcher torchrun")
	fl.String("rdzv-endpoint", "", "with --rdzv-backend static: HOST:PORT of rank 0's store (as --master-addr/--master-port); else passed to torchrun")
	fl.String("rdzv-id", "", "the job's id: TORCHELASTIC_RUN_ID (default: a fresh one)")
	fl.String("rdzv-conf", "", "with --launcher torchrun: passed to torchrun")
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
func addTorchrunFlags(cmd *cobra.Command, o *Options) {
	fl := cmd.Flags()
	fl.Bool("standalone", false, "one node, rendezvous on a free local port (amdrun's default; as torchrun)")
	fl.StringVar(&o.Role, "role", "", "ROLE_NAME of the ranks (default \"default\")")
	fl.Bool("virtual-local-rank", false, "every rank sees only its own devices and gets LOCAL_RANK=0")
	fl.Bool("run-path", false, "run SCRIPT with the Python interpreter even with --no-python (as torchrun's runpy.run_path)")
	fl.StringP("redirects", "r", "", "streams of each rank written only to --log-dir: "+streamHelp()+", or per local rank, e.g. 0:3,1:0")
	fl.StringP("tee", "t", "", "streams of each rank written to --log-dir and the console (values as --redirects)")
	fl.Int("shutdown-timeout", 0, "seconds between SIGTERM and SIGKILL (torchrun's name for --grace)")
	cmdutil.StringEnumFlag(cmd, new(string), numaBindingFlag, "", "torchrun's binding: %s (the others = --bind of that name)")
	fl.String("signals-to-handle", "", fmt.Sprintf("signals forwarded to the ranks, e.g. SIGTERM,SIGINT,SIGUSR1 (default %s); %s also stop the job",
		strings.Join(job.ForwardedSignals, ", "), cmdutil.JoinAnd(job.StopSignals)))
	fl.String("monitor-interval", "", "accepted for torchrun: amdrun sees a rank exit at once, there is nothing to poll")
	cmdutil.StringEnumFlag(cmd, new(string), startMethodFlag, "", "accepted for torchrun (%s): ranks are programs, started the same way under each")
	fl.String("event-log-handler", "", "passed to torch's agent when it runs the job (amdrun records no torchelastic events)")
	fl.String("local-addr", "", "passed to torch's agent when it runs the job (its rendezvous address of this node)")
	fl.String("logs-specs", "", "passed to torch's agent when it runs the job (a torchrun.logs_specs entry point)")
	fl.String("duplicate-stdout-filters", "", "passed to torch's agent when it runs the job")
	fl.String("duplicate-stderr-filters", "", "passed to torch's agent when it runs the job")
}

// normalizeFlag makes --nproc_per_node the same flag as
// --nproc-per-node, as torchrun accepts both.
func normalizeFlag(_ *pflag.FlagSet, name string) pflag.NormalizedName {
	return pflag.NormalizedName(strings.ReplaceAll(name, "_", "-"))
}

// applyPET sets every flag that torchrun also reads from a PET_* variable
// (job.PET) and that the command line left alone from env. A boolean
// flag's variable is a number, true when not 0, as torchrun's check_env
// reads it. It records which flags came from the environment in from, so
// that errors name the variable.
func applyPET(fl *pflag.FlagSet, env []string, from map[string]string) error {
	for _, p := range job.PET(env) {
		f := fl.Lookup(p.Flag)
		if f == nil || f.Changed {
			continue
		}
		v := p.Value
		if f.Value.Type() == "bool" {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				return cmdutil.FlagErrorf("%s: want a number (0 off, 1 on, as torchrun reads it), got %q", p.Var, v)
			}
			v = strconv.FormatBool(n != 0)
		}
		if err := fl.Set(p.Flag, v); err != nil {
			return cmdutil.ValueError(p.Var, err)
		}
		from[p.Flag] = p.Var
	}
	return nil
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
		flags = append(flags, job.Flag{Name: f.Name, Shorthand: f.Shorthand, Bare: f.NoOptDefVal != ""})
	}
	cmd.Flags().VisitAll(add)
	cmd.PersistentFlags().VisitAll(add)
	out, err := job.ExpandAbbrev(flags, args)
	return out, usageError(err)
}
