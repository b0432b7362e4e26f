// Package runcmd is amdrun's root command: choose devices, plan the ranks,
// start and supervise them (or, with --dry-run, print the plan).
package runcmd

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/amdrun/amdrun/cmd/amdrun/internal/cmdutil"
	"github.com/amdrun/amdrun/cmd/amdrun/internal/iostreams"
	"github.com/amdrun/amdrun/internal/job"
	"github.com/amdrun/amdrun/internal/launch"
	"github.com/amdrun/amdrun/internal/launch/lease"
	"github.com/amdrun/amdrun/internal/launch/numabalance"
	"github.com/amdrun/amdrun/internal/launch/slurm"
	"github.com/amdrun/amdrun/internal/selector"
	"github.com/amdrun/amdrun/internal/topology"
	"github.com/spf13/cobra"
)

// Options are the launch command's inputs: the pipeline's job.Options,
// which the flags bind into, and what only the command reads.
type Options struct {
	IO *iostreams.IOStreams
	job.Options
	Now func() time.Time

	// DryRun prints the plan (job.Preview) instead of running it; JSON
	// prints it as job.Document.
	DryRun, JSON bool
	// Slurm is the allocation amdrun runs in, or nil.
	Slurm *slurm.Job
}

// raw holds flag values that need parsing in validation.
type raw struct {
	devices, exclude, policy, order, bind, mem, ranksFilter, wait, numaBalancing, contain string
	nnodes, grace                                                                         string
	rdzvBackend, rdzvEndpoint, rdzvID, rdzvConf                                           string
	torchrun                                                                              torchrunFlags
	// pet maps the flags set from PET_* variables to the variable.
	pet map[string]string
}

// label names flag as the user gave it: --flag, or the PET_* variable it
// came from.
func (r *raw) label(flag string) string {
	if v, ok := r.pet[flag]; ok {
		return v
	}
	return "--" + flag
}

const long = `amdrun starts torchrun-compatible worker processes on the best-connected
free set of GPUs of this node.

It reads how the GPUs are wired (KFD sysfs, amd-smi, rocm-smi or nvidia-smi),
picks the set of N free devices with the best links, sets CUDA_VISIBLE_DEVICES
and HIP_VISIBLE_DEVICES, binds each rank to its GPU's NUMA node, starts
"python3 -u SCRIPT ARGS..." once per rank with the torchrun environment (RANK,
LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, ...) and supervises the
ranks: when one fails the others are stopped and amdrun exits with its code.

Flags go before SCRIPT; everything after SCRIPT belongs to the script.

Ranks and devices: --ngpus is the number of devices, --nproc-per-node the
number of ranks. Given one, they are equal (one device per rank); given both,
each rank gets ngpus/nproc devices, chosen as one set, and sees only its own.
On a node without a GPU (or with --ngpus 0 --nproc-per-node N) the ranks run
on CPUs (use the gloo backend), spread over the NUMA nodes.

Every torchrun flag is accepted, in either spelling (--nproc-per-node or
--nproc_per_node), also from torchrun's PET_* variables (a flag given on the
command line wins); one amdrun cannot honour is refused in one line.

Policies (--policy):
  tree  (default) maximise the weakest link of the widest spanning tree of
        the set, then the total pairwise bandwidth.
  ring  maximise the weakest link of the best ring through the set (for
        jobs dominated by ring all-reduce), then the set's minimum cut, then
        the total pairwise bandwidth.
Then, for both: locality (same package > same hive > other XGMI/NVLink >
PIX > PXB > PHB > NODE > SYS), fewest NUMA nodes, fewest busy devices,
best fit (leave other jobs whole packages, switches and NUMA nodes), least
load, lowest indices. Pairs without a direct link count at the host PCIe
bandwidth (32 GB/s on one NUMA node, 16 GB/s across two); measured
bandwidths are compared in levels 2.5% apart. The search stops at
--search-work with the best set found (a work count, so the same request
gets the same devices on a busy node; --search-budget is a time cap on top).

Exit status: the first failing rank's exit code (128+signal if it was
killed); 2 for a usage error; 1 when amdrun itself fails (not enough free
devices, a vendor tool failed, ...).`

const example = `  amdrun --ngpus 4 train.py --lr 3e-4
  amdrun -n 2 --policy ring examples/allreduce_check.py /tmp
  amdrun --ngpus 4 --dry-run --explain examples/allreduce.py
  amdrun --devices 0-3 --exclude 2 --no-python -- hostname
  amdrun --ngpus 4 --nproc-per-node 1 --no-python vllm serve MODEL --tensor-parallel-size 4
  amdrun --ngpus 0 --nproc-per-node 4 examples/allreduce_check.py /tmp
  amdrun --topology node.json --ngpus 8 --dry-run --json train.py`

// NewCmdRun returns the root launch command; runF replaces Run in tests.
func NewCmdRun(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams, Now: f.Now}
	opts.Deps = job.Deps{
		Stdout: f.IOStreams.Out, Stderr: f.IOStreams.ErrOut, Stdin: f.IOStreams.In,
		Topology: f.Topology, Rediscover: f.Rediscover, Run: f.Run, Env: f.Env, Executable: f.Executable,
		Warn: f.Warn, HostNUMA: f.HostNUMA, NumCPU: runtime.NumCPU,
	}
	r := raw{pet: map[string]string{}}
	var leaseDir string
	cmd := &cobra.Command{
		Use:           "amdrun [flags] SCRIPT [ARGS...]",
		Short:         "Launch multi-GPU PyTorch jobs on the best-connected free GPUs",
		Long:          long,
		Example:       example,
		Args:          cobra.ArbitraryArgs,
		SilenceErrors: true,
		SilenceUsage:  true,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Args = args
			opts.SourceAuto = f.Topo.Source == "" || f.Topo.Source == "auto"
			if f.Topo.File != "" {
				opts.SourceAuto = false
			}
			opts.Root = f.SysfsRoot()
			// A dry run takes no lease: it must not make the directory either.
			opts.Leases = func(create bool) (*lease.Dir, error) { return f.OpenLeases(leaseDir, create) }
			if err := applyPET(cmd.Flags(), f.Env(), r.pet); err != nil {
				return err
			}
			if err := parseNNodes(opts, &r); err != nil {
				return err
			}
			if err := fromSlurm(cmd, f, opts); err != nil {
				return err
			}
			if err := validate(cmd, opts, &r); err != nil {
				return err
			}
			opts.Python, opts.PythonFrom = f.PythonFrom(opts.Python)
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return Run(cmd.Context(), opts)
		},
	}
	// torchrun takes --nproc_per_node as well as --nproc-per-node.
	cmd.SetGlobalNormalizationFunc(normalizeFlag)
	fl := cmd.Flags()
	fl.SetInterspersed(false) // flags after SCRIPT belong to the script
	addDeviceFlags(cmd, opts, &r)
	addRankFlags(cmd, opts, &r)
	addJobFlags(cmd, opts, &r, &leaseDir)
	addTorchrunFlags(fl, opts, &r.torchrun)
	fl.SortFlags = false
	registerCompletions(cmd)
	return cmd
}

// validate turns the flags' raw values into Options and refuses what
// cannot run, in one line each: the words and lists first, then
// torchrun's flags, the wait, the rendezvous, this node's place in the
// job, and the command.
func validate(cmd *cobra.Command, o *Options, r *raw) error {
	if err := parseValues(cmd, o, r); err != nil {
		return err
	}
	if err := validateTorchrun(cmd, o, &r.torchrun, r.label); err != nil {
		return err
	}
	if o.CPUOnly && (o.Devices != nil || o.Exclude != nil) {
		return cmdutil.FlagErrorf("--devices and --exclude choose GPUs: they do not apply to CPU ranks (--ngpus 0 or --nproc-per-node cpu)")
	}
	if err := parseWait(o, r); err != nil {
		return err
	}
	if o.Grace < 0 {
		return cmdutil.FlagErrorf("--grace must not be negative")
	}
	if o.MaxRestarts < 0 {
		return cmdutil.FlagErrorf("%s must not be negative", r.label("max-restarts"))
	}
	if err := validateRendezvous(cmd, o, r); err != nil {
		return err
	}
	if err := validateNodes(cmd, o, r); err != nil {
		return err
	}
	return validateCommand(cmd, o, r)
}

// parseValues parses the flags whose values are words, lists and
// durations.
func parseValues(cmd *cobra.Command, o *Options, r *raw) error {
	var err error
	changed := cmd.Flags().Changed
	if o.NGPUs < 0 {
		return cmdutil.FlagErrorf("--ngpus must be at least 0 (0 means every free device), got %d", o.NGPUs)
	}
	if o.Grace, err = parseDuration("--grace", r.grace); err != nil {
		return err
	}
	if o.Devices, err = parseIndexList("--devices", r.devices, changed("devices")); err != nil {
		return err
	}
	if o.Exclude, err = parseIndexList("--exclude", r.exclude, changed("exclude")); err != nil {
		return err
	}
	if o.Policy, err = selector.PolicyByName(r.policy); err != nil {
		return policyFlag.Err(r.policy)
	}
	if o.SearchWork <= 0 {
		return cmdutil.FlagErrorf("--search-work must be positive, got %d", o.SearchWork)
	}
	if o.SearchBudget <= 0 {
		return cmdutil.FlagErrorf("--search-budget must be positive, got %s", o.SearchBudget)
	}
	if o.Order, err = selector.ParseOrder(r.order); err != nil {
		return orderFlag.Err(r.order)
	}
	if r.bind != "" {
		if o.Bind, err = launch.ParseBindMode(r.bind); err != nil {
			return bindFlag.Err(r.bind)
		}
	}
	if o.Mem, err = launch.ParseMemPolicy(r.mem); err != nil {
		return memFlag.Err(r.mem)
	}
	if strings.TrimSpace(r.ranksFilter) != "" {
		if o.RanksFilter, err = parseIndexList(r.label("local-ranks-filter"), r.ranksFilter, true); err != nil {
			return err
		}
	}
	if o.Contain, err = launch.ParseContainment(r.contain); err != nil {
		return containFlag.Err(r.contain)
	}
	if o.NUMABalancing, err = numabalance.ParseMode(r.numaBalancing); err != nil {
		return numaBalancingFlag.Err(r.numaBalancing)
	}
	return nil
}

// parseWait reads --wait: absent, bare (forever) or a positive duration.
func parseWait(o *Options, r *raw) error {
	switch r.wait {
	case "":
	case "forever":
		o.Wait = -1
		if len(o.Args) > 0 {
			if _, err := time.ParseDuration(o.Args[0]); err == nil {
				return cmdutil.FlagErrorf("--wait %s: write --wait=%s (with =) for a timeout; %q would be taken as the script", o.Args[0], o.Args[0], o.Args[0])
			}
		}
	default:
		d, err := parseDuration("--wait", r.wait)
		if err != nil {
			return err
		}
		if d <= 0 {
			return cmdutil.FlagErrorf("--wait: want a duration such as 30s or 10m, got %q", r.wait)
		}
		o.Wait = d
	}
	return nil
}

// validateNodes checks this node's place in the job: the node count and
// rank, and the master every node must agree on.
func validateNodes(cmd *cobra.Command, o *Options, r *raw) error {
	if o.NNodes < 1 {
		return cmdutil.FlagErrorf("%s must be at least 1, got %d", r.label("nnodes"), o.NNodes)
	}
	if o.NodeRank < 0 || o.NodeRank >= o.NNodes {
		return cmdutil.FlagErrorf("%s must be in 0..%d, got %d", r.label("node-rank"), o.NNodes-1, o.NodeRank)
	}
	if o.MasterPort < 0 || o.MasterPort > 65535 {
		return cmdutil.FlagErrorf("%s must be in 1..65535, got %d", r.label("master-port"), o.MasterPort)
	}
	multiNodeDefaults(o, cmd.Flags().Changed)
	return nil
}

// validateCommand checks what the ranks run and what is shown: the
// interpreter, the local ranks filter, the rank count several nodes need,
// and the script.
func validateCommand(cmd *cobra.Command, o *Options, r *raw) error {
	if cmd.Flags().Changed("python") && strings.TrimSpace(o.Python) == "" {
		return cmdutil.FlagErrorf("--python: empty interpreter path")
	}
	if n := o.ranksKnown(); n > 0 {
		for _, lr := range o.RanksFilter {
			if lr >= n {
				return cmdutil.FlagErrorf("%s: local rank %d does not exist with %d rank(s) (0-%d)", r.label("local-ranks-filter"), lr, n, n-1)
			}
		}
	}
	if o.NNodes > 1 && o.ranksKnown() == 0 && !o.CPUOnly {
		return cmdutil.FlagErrorf("--nnodes %d needs --ngpus or --nproc-per-node N: every node must run the same number of ranks", o.NNodes)
	}
	if o.Module && o.NoPython {
		return cmdutil.FlagErrorf("%s and %s cannot be used together", r.label("module"), r.label("no-python"))
	}
	if o.JSON && !o.DryRun {
		return cmdutil.FlagErrorf("--json needs --dry-run")
	}
	if len(o.Args) == 0 && !o.DryRun {
		return cmdutil.FlagErrorf("missing SCRIPT: amdrun [flags] SCRIPT [ARGS...] (see amdrun --help)")
	}
	return nil
}

// ranksKnown is the number of ranks on this node when the flags fix it,
// else 0 (one per free device, or one per CPU).
func (o *Options) ranksKnown() int {
	switch {
	case o.NProc > 0:
		return o.NProc
	case o.NProcKind == "" && o.NGPUs > 0:
		return o.NGPUs
	case o.NProcKind != "" && o.NGPUs > 0 && o.NProcKind != "cpu":
		return o.NGPUs
	}
	return 0
}

// validateRendezvous reads --standalone and the --rdzv-* flags: with
// --launcher torchrun they are passed on; with amdrun's own launcher the
// static backend's endpoint is the master's address, --rdzv-id is the
// run id, and a rendezvous service is refused on more than one node.
func validateRendezvous(cmd *cobra.Command, o *Options, r *raw) error {
	changed := cmd.Flags().Changed
	rdzv := map[string]string{}
	for k, v := range map[string]string{"backend": r.rdzvBackend, "endpoint": r.rdzvEndpoint, "id": r.rdzvID, "conf": r.rdzvConf} {
		if v != "" {
			rdzv[k] = v
		}
	}
	if r.torchrun.standalone {
		if o.NNodes != 1 || o.ElasticNNodes != "" {
			return cmdutil.FlagErrorf("%s runs one node: it cannot be used with %s %s", r.label("standalone"), r.label("nnodes"), r.nnodes)
		}
		// As torchrun: standalone picks its own rendezvous; say what is
		// dropped instead of dropping it silently.
		var dropped []string
		for _, name := range []string{"master-addr", "master-port", "rdzv-backend", "rdzv-endpoint", "rdzv-id", "rdzv-conf"} {
			if changed(name) {
				dropped = append(dropped, r.label(name))
			}
		}
		if len(dropped) > 0 {
			o.Warn.Warn("%s: ignoring %s (a standalone job rendezvouses on a free local port, as with torchrun)", r.label("standalone"), strings.Join(dropped, ", "))
		}
		o.MasterAddr, o.MasterPort, rdzv = launch.DefaultMasterAddr, 0, map[string]string{}
	}
	switch o.Launcher {
	case "amdrun":
		if handToAgent(o, rdzv) {
			return validateRendezvous(cmd, o, r)
		}
		switch backend := rdzv["backend"]; backend {
		case "", "static":
			if ep, ok := rdzv["endpoint"]; ok {
				// torchrun: a static rendezvous's endpoint is the master.
				host, port, err := splitHostPort(ep)
				if err != nil {
					return cmdutil.FlagErrorf("%s: want HOST:PORT, got %q", r.label("rdzv-endpoint"), ep)
				}
				if (changed("master-addr") && r.pet["master-addr"] == "" && o.MasterAddr != host) ||
					(changed("master-port") && r.pet["master-port"] == "" && o.MasterPort != port) {
					return cmdutil.FlagErrorf("%s %s and --master-addr/--master-port %s:%d disagree: give one", r.label("rdzv-endpoint"), ep, o.MasterAddr, o.MasterPort)
				}
				o.MasterAddr, o.MasterPort = host, port
			}
		default:
			// One node: amdrun's own store on a free local port serves the
			// ranks as torchrun's rendezvous would.
		}
		o.RunID = rdzv["id"]
		if c, ok := rdzv["conf"]; ok && o.NNodes == 1 {
			if err := rdzvConfOneNode(o, r.label("rdzv-conf"), c); err != nil {
				return err
			}
		}
	case "torchrun":
		for _, f := range []string{"python", "no-prefix", "bind"} {
			if changed(f) && !(o.Agent && f == "python") { // the agent runs with --python
				return cmdutil.FlagErrorf("--%s does not apply with --launcher torchrun (torchrun starts the ranks: give torchrun's own options through its environment or use --launcher amdrun)", f)
			}
		}
		o.Rdzv = rdzv
		o.TorchrunArgs = torchrunArgs(cmd, o, &r.torchrun)
		if o.ranksKnown() == 0 && !o.CPUOnly && !o.DryRun {
			return cmdutil.FlagErrorf("--launcher torchrun needs --ngpus or --nproc-per-node N")
		}
		if o.NProc > 1 && o.NGPUs > o.NProc {
			return cmdutil.FlagErrorf("--launcher torchrun shows every worker all the devices: several devices per rank need --launcher amdrun (or --nproc-per-node 1)")
		}
	default:
		return launcherFlag.Err(o.Launcher)
	}
	return nil
}

// splitHostPort splits HOST:PORT (an IPv6 host in brackets) with a port
// in 1..65535.
func splitHostPort(s string) (string, int, error) {
	host, p, err := net.SplitHostPort(s)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 1 || port > 65535 || host == "" {
		return "", 0, fmt.Errorf("bad port %q", p)
	}
	return host, port, nil
}

// parseDuration parses a duration flag; a bare number gets an error that
// says to add a unit.
func parseDuration(flag, s string) (time.Duration, error) {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err == nil {
		return d, nil
	}
	if _, nerr := strconv.ParseFloat(strings.TrimSpace(s), 64); nerr == nil && s != "0" {
		return 0, cmdutil.FlagErrorf("%s %s: add a unit, e.g. %ss or %sm", flag, s, s, s)
	}
	return 0, cmdutil.FlagErrorf("%s: want a duration such as 30s or 10m, got %q", flag, s)
}

// parseNNodes reads --nnodes: a count, or MIN:MAX for torchrun's elastic
// rendezvous.
func parseNNodes(o *Options, r *raw) error {
	if strings.Contains(r.nnodes, ":") {
		lo, hi, _ := strings.Cut(r.nnodes, ":")
		a, err1 := strconv.Atoi(lo)
		b, err2 := strconv.Atoi(hi)
		if err1 != nil || err2 != nil || a < 1 || b < a {
			return cmdutil.FlagErrorf("%s: want N or MIN:MAX with 1 <= MIN <= MAX, got %q", r.label("nnodes"), r.nnodes)
		}
		if a == b { // torchrun's default "1:1" is one node, not a range
			o.NNodes = a
			return nil
		}
		o.ElasticNNodes, o.NNodes = r.nnodes, 1
		return nil
	}
	n, err := strconv.Atoi(r.nnodes)
	if err != nil {
		return cmdutil.FlagErrorf("%s: want a number of nodes, got %q", r.label("nnodes"), r.nnodes)
	}
	o.NNodes = n
	return nil
}

// fromSlurm reads the Slurm allocation amdrun runs in (SLURM_JOB_ID set)
// and fills --nnodes, --node-rank, --master-addr and --master-port from it
// (and --ngpus on several nodes, when Slurm gave every node's task the
// same number of GPUs) where the user did not give them: explicit flags
// win. A step amdrun cannot run one per node is refused in one line.
func fromSlurm(cmd *cobra.Command, f *cmdutil.Factory, o *Options) error {
	run := func(name string, args ...string) ([]byte, error) {
		return f.Run(cmd.Context(), name, args...)
	}
	job, err := slurm.FromEnvWith(f.Env(), run)
	if err != nil || job == nil {
		return err
	}
	o.Slurm = job
	// The task's GPU grant bounds the devices whatever the job's shape
	// (issue 24); only an explicit --ngpus 0 may run CPU ranks in a task
	// granted GPUs that finds none.
	o.Grant, o.NoGPUOK = job.Grant, cmd.Flags().Changed("ngpus") && o.NGPUs == 0
	if cmd.Flags().Changed("nnodes") && o.NNodes != job.NNodes {
		// The user runs a job of another shape inside the allocation (e.g.
		// one node's own job): Slurm's ranks and master do not apply.
		return nil
	}
	if err := job.Launchable(); err != nil {
		return err
	}
	s := slurm.Merge(slurm.Settings{NNodes: o.NNodes, NodeRank: o.NodeRank, MasterAddr: o.MasterAddr, MasterPort: o.MasterPort},
		cmd.Flags().Changed, job)
	o.NNodes, o.NodeRank, o.MasterAddr, o.MasterPort = s.NNodes, s.NodeRank, s.MasterAddr, s.MasterPort
	if o.NNodes > 1 && !cmd.Flags().Changed("ngpus") && job.NodeGPUs > 0 {
		o.NGPUs = job.NodeGPUs
	}
	if o.NNodes == 1 && !cmd.Flags().Changed("master-port") && !cmd.Flags().Changed("master-addr") {
		// One node: a free local port, so that two jobs of one
		// allocation on one node do not collide on the job's port.
		o.MasterAddr, o.MasterPort = "127.0.0.1", 0
	}
	return nil
}

// parseIndexList parses "0,2,4-7" into device indices.
func parseIndexList(flag, s string, given bool) ([]int, error) {
	if !given {
		return nil, nil
	}
	if strings.TrimSpace(s) == "" {
		return nil, cmdutil.FlagErrorf("%s: empty device list", flag)
	}
	l, err := topology.ParseCPUList(s)
	if err != nil {
		return nil, cmdutil.FlagErrorf("%s: want indices like 0,2,4-7, got %q", flag, s)
	}
	return l, nil
}

// Run runs the launch: the plan printed (--dry-run, job.Preview) or the
// job run to its end (job.Run), its first failing rank's exit status
// returned as an ExitCodeError.
func Run(ctx context.Context, o *Options) error {
	if o.DryRun {
		p, err := job.Preview(ctx, &o.Options)
		if err != nil {
			return err
		}
		if o.JSON {
			return p.WriteJSON(o.IO.Out)
		}
		p.WriteText(o.IO.Out, o.Explain)
		return nil
	}
	code, err := job.Run(ctx, &o.Options)
	if err != nil {
		return err
	}
	if code != 0 {
		return &cmdutil.ExitCodeError{Code: code}
	}
	return nil
}

// addDeviceFlags declares the flags that choose the devices and what a dry run prints.
func addDeviceFlags(cmd *cobra.Command, opts *Options, r *raw) {
	fl := cmd.Flags()
	fl.IntVarP(&opts.NGPUs, "ngpus", "n", 0, "number of GPUs on this node, one rank each unless --nproc-per-node says otherwise (default and 0: every free device; in a multi-node Slurm step, the GPUs Slurm gave each node)")
	fl.StringVar(&r.torchrun.nproc, "nproc-per-node", "", "ranks on this node: N, gpu (one per free device), auto (gpu, else one per CPU) or cpu (one per CPU, no GPU); with --ngpus, each rank gets ngpus/N devices (default: one rank per device)")
	fl.StringVar(&r.devices, "devices", "", "only choose among these device indices, e.g. 0,2,4-7")
	fl.StringVar(&r.exclude, "exclude", "", "never choose these device indices, e.g. 3 or 0-1")
	fl.BoolVar(&opts.AllowBusy, "allow-busy", false, "allow devices another process is using")
	cmdutil.StringEnumFlag(cmd, &r.policy, policyFlag, "tree", "selection policy: %s")
	fl.IntVar(&opts.SearchWork, "search-work", selector.DefaultWork, "most work (about a thousand search steps a unit) the device search may spend; past it the best set found is used (--explain says how far from proven); the answer depends on it, not on the machine's load")
	fl.DurationVar(&opts.SearchBudget, "search-budget", selector.DefaultBudget, "wall-clock safety cap of the device search; if it fires before --search-work, the set found so far is used and --explain says so")
	cmdutil.StringEnumFlag(cmd, &r.order, orderFlag, "index", "rank order: %s")
	fl.BoolVar(&opts.DryRun, "dry-run", false, "print the plan (devices, per-rank NUMA node, CPUs and command) and exit without starting anything")
	fl.BoolVar(&opts.Explain, "explain", false, "explain the choice: score terms, the next best sets, and the naive first-N pick")
	fl.BoolVar(&opts.JSON, "json", false, "with --dry-run: print the plan as JSON")
}

// addRankFlags declares the flags of what each rank runs, its binding, and how the ranks are supervised.
func addRankFlags(cmd *cobra.Command, opts *Options, r *raw) {
	fl := cmd.Flags()
	fl.BoolVarP(&opts.Module, "module", "m", false, "run SCRIPT as a Python module (python -m MODULE)")
	fl.BoolVar(&opts.NoPython, "no-python", false, "run SCRIPT directly as a program, not through Python")
	fl.StringVar(&opts.Python, "python", "", "Python interpreter (default $PYTHON_EXEC, else the active environment's: $VIRTUAL_ENV/bin/python, $CONDA_PREFIX/bin/python; else python3 on PATH)")
	cmdutil.StringEnumFlag(cmd, &r.bind, bindFlag, "", "CPU/memory binding per rank: %s (default numa when the host has more than one NUMA node, else none)")
	cmdutil.StringEnumFlag(cmd, &r.mem, memFlag, "bind", "memory policy with --bind numa/exclusive: %s")
	fl.StringVar(&r.grace, "grace", "10s", "after a rank fails, time the others get between SIGTERM and SIGKILL, with a unit (0: SIGKILL at once)")
	fl.IntVar(&opts.MaxRestarts, "max-restarts", 0, "restart the whole group this many times after a failure")
	cmdutil.StringEnumFlag(cmd, &r.contain, containFlag, "auto", "how nothing the job starts outlives it: %s")
	fl.BoolVar(&opts.NoPrefix, "no-prefix", false, "do not prefix output lines with [rankN]:")
	fl.StringVar(&opts.LogDir, "log-dir", "", "write each rank's output and error file to `DIR`/RUNID_XXXXXXXX/attempt_K/LOCAL_RANK/{stdout.log,stderr.log,error.json}, as torchrun (every stream, unless -r/-t choose)")
	fl.StringVar(&r.ranksFilter, "local-ranks-filter", "", "show only these local ranks' output on the console, e.g. 0 or 0,3")
}

// addJobFlags declares the flags that place this node in the job: nodes, the master, NUMA balancing, leases, the launcher and the rendezvous.
func addJobFlags(cmd *cobra.Command, opts *Options, r *raw, leaseDir *string) {
	fl := cmd.Flags()
	fl.StringVar(&r.nnodes, "nnodes", "1", "number of nodes (one amdrun per node); MIN:MAX with --launcher torchrun")
	fl.IntVar(&opts.NodeRank, "node-rank", 0, "this node's rank, 0 to nnodes-1")
	fl.StringVar(&opts.MasterAddr, "master-addr", "127.0.0.1", "address of the node that hosts rank 0's store")
	fl.IntVar(&opts.MasterPort, "master-port", 0, "port of rank 0's store (default: a free port on one node)")
	cmdutil.StringEnumFlag(cmd, &r.numaBalancing, numaBalancingFlag, "keep", "set kernel.numa_balancing for the job and restore it after: %s")
	fl.StringVar(leaseDir, "lease-dir", "", "directory of device leases shared by every amdrun on the node (default $AMDRUN_LEASE_DIR, else /run/lock/amdrun)")
	fl.BoolVar(&opts.NoLease, "no-lease", false, "do not take or respect device leases")
	fl.StringVar(&r.wait, "wait", "", "when not enough devices are free, wait for them (optionally at most DURATION, e.g. --wait=10m)")
	fl.Lookup("wait").NoOptDefVal = "forever"
	cmdutil.StringEnumFlag(cmd, &opts.Launcher, launcherFlag, "amdrun", "who starts the ranks: %s")
	fl.StringVar(&r.rdzvBackend, "rdzv-backend", "", "static (amdrun's; the default), or c10d/etcd on one node; other rendezvous need --launcher torchrun")
	fl.StringVar(&r.rdzvEndpoint, "rdzv-endpoint", "", "with --rdzv-backend static: HOST:PORT of rank 0's store (as --master-addr/--master-port); else passed to torchrun")
	fl.StringVar(&r.rdzvID, "rdzv-id", "", "the job's id: TORCHELASTIC_RUN_ID (default: a fresh one)")
	fl.StringVar(&r.rdzvConf, "rdzv-conf", "", "with --launcher torchrun: passed to torchrun")
}
