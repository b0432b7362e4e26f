package job

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"

	"github.com/amdrun/amdrun/internal/launch"
	"github.com/amdrun/amdrun/internal/launch/numabalance"
	"github.com/amdrun/amdrun/internal/lease"
	"github.com/amdrun/amdrun/internal/plan"
)

// canLaunch is launch.Supported; tests of other systems' behaviour set it.
var canLaunch = launch.Supported

// ErrNeedsLinux is Run's error on a system where ranks cannot be started.
var ErrNeedsLinux = errors.New("starting ranks needs Linux; on this system amdrun only plans (add --dry-run, e.g. with --topology node.json saved by 'amdrun topo --json' on the node)")

// ErrNoScript is Run's error, before anything starts, for a SCRIPT that
// is not there: "missing.py: no such file" (python would fail in every
// rank, issue 31).
var ErrNoScript = errors.New("no such file")

// MissingScript is the script the ranks would run with Python that is
// not there (relative to the working directory, which the ranks
// share), "" when there is none: a module (-m) and a program
// (--no-python) are found by their own rules.
func (o *Options) MissingScript() string {
	if len(o.Args) == 0 || o.Module || o.NoPython {
		return ""
	}
	if _, err := os.Stat(o.Args[0]); errors.Is(err, fs.ErrNotExist) {
		return o.Args[0]
	}
	return ""
}

// Preview discovers the node, chooses the devices (respecting leases,
// taking none) and plans the ranks, without starting anything: what
// `amdrun --dry-run` shows. It does not look for SCRIPT: the plan may be
// for another node (--topology), and Run refuses a missing one in one
// line before anything starts.
func Preview(ctx context.Context, o *Options) (*Plan, error) {
	p, err := prepare(ctx, o, true)
	if err != nil {
		return nil, err
	}
	p.release()
	return p, nil
}

// Run launches the job and supervises it to its end: it reserves and
// plans as Preview does (taking the devices' lease), applies NUMA
// balancing, and runs the ranks (or torchrun) under launch.Run, the
// lease held until the job's last process is gone. code is the first
// failing rank's exit status (0 when every rank succeeded); err is
// amdrun's own failure (ErrNoScript before anything starts).
func Run(ctx context.Context, o *Options) (code int, err error) {
	if !canLaunch {
		return 0, ErrNeedsLinux
	}
	if s := o.MissingScript(); s != "" {
		return 0, fmt.Errorf("%s: %w", s, ErrNoScript)
	}
	p, err := prepare(ctx, o, false)
	if err != nil {
		return 0, err
	}
	defer p.release()
	if o.Explain && p.Choice != nil {
		p.WriteExplain(o.Stderr)
	}
	restore, err := numabalance.Apply(o.Root, o.NUMABalancing)
	if err != nil {
		return 0, err
	}
	defer func() {
		if err := restore(); err != nil {
			o.Warn.Warn("%v", err)
		}
	}()
	return supervise(ctx, o, p)
}

// prepare is the pipeline up to the plan: the torch probe (in the
// background while the node is discovered), the placement (devices and
// their lease, or CPU ranks) and the plan of every rank. Its Plan holds
// the lease, if any, until release.
func prepare(ctx context.Context, o *Options, dryRun bool) (*Plan, error) {
	env := o.Env()
	torch := torchVersion(ctx, o) // runs while the node is discovered
	pl, err := place(ctx, o, env, dryRun)
	if err != nil {
		return nil, err
	}
	// A host that does not tell its NUMA nodes (a container's partial
	// sysfs) has its ranks unbound: quietly by default, with nothing for
	// the user to do; with --bind, the plan says so in one line.
	hostNUMA, err := o.HostNUMA()
	if err != nil {
		hostNUMA = nil
	}
	tv := <-torch
	cl := &cpuLeaser{ctx: ctx, o: o, dryRun: dryRun}
	ranks, err := planRanks(o, pl, env, hostNUMA, tv, cl)
	if err != nil {
		pl.release()
		return nil, err
	}
	for _, w := range ranks.Warnings {
		o.Warn.Warn("%s", w)
	}
	if note := ompNote(o, dryRun, ranks.OMPNote); note != "" {
		o.Warn.Warn("%s", note)
	}
	p := &Plan{Model: pl.model, Choice: pl.choice, Ranks: ranks, Run: ranks, held: pl.held, cpuHeld: cl.held}
	if !o.NoPython {
		p.Python, p.PythonFrom, p.TorchVersion = o.Python, o.PythonFrom, tv
	}
	if o.Launcher == "torchrun" {
		p.Run = plan.TorchrunPlan(ranks, torchrunSettings(o, env, ranks))
		p.Torchrun = true
	}
	return p, nil
}

// ompNote is the plan's OMP_NUM_THREADS note (note) when it is worth a
// line: amdrun's values reach Python ranks that run. Not in a dry run
// (its plan shows them), not with --no-python, not under torchrun (which
// sets its own, and says so). Issue 31: it came on every command.
func ompNote(o *Options, dryRun bool, note string) string {
	if dryRun || o.NoPython || o.Launcher == "torchrun" {
		return ""
	}
	return note
}

// torchrunSettings hands this node's plan to torchrun: the one on PATH,
// or for a job amdrun hands to torch's own agent (Options.Agent), the
// workers' own interpreter's. Under the agent bound ranks stay bound:
// it starts each worker through amdrun's bind shim (plan.Torchrun.Shim);
// without amdrun's own path they run unbound, and one line says so.
func torchrunSettings(o *Options, env []string, ranks *plan.Plan) plan.Torchrun {
	t := plan.Torchrun{
		UserEnv: env, ElasticNNodes: o.ElasticNNodes, Rdzv: o.Rdzv,
		Module: o.Module, NoPython: o.NoPython, Extra: o.TorchrunArgs, Args: o.Args,
	}
	if !o.Agent {
		return t
	}
	t.Agent = []string{o.Python, "-m", "torch.distributed.run"}
	if local := launch.LocalShimArgs(ranks); local != nil {
		self, err := o.Executable()
		if err != nil {
			o.Warn.Warn("cannot find amdrun's own binary, the agent's workers are not bound: %v", err)
			return t
		}
		t.Shim = append([]string{self, launch.ShimArg}, local...)
	}
	return t
}

// supervise runs p under launch.Run with the lease's lock files held by
// the processes that watch over the job.
func supervise(ctx context.Context, o *Options, p *Plan) (int, error) {
	self, err := o.Executable()
	if err != nil {
		return 0, fmt.Errorf("cannot find amdrun's own binary for binding: %w", err)
	}
	// The processes that watch over the job keep the leases' files open,
	// so the devices and CPUs stay leased while anything of the job runs
	// (issue 13).
	var hold []*os.File
	defer func() {
		for _, f := range hold {
			f.Close()
		}
	}()
	for _, l := range []*lease.Lease{p.held, p.cpuHeld} {
		if l != nil {
			files, err := l.Files()
			if err != nil {
				return 0, err
			}
			hold = append(hold, files...)
		}
	}
	ro := runOptions(o, p)
	ro.Self, ro.Hold = self, hold
	code, err := launch.Run(ctx, p.Run, ro)
	if errors.Is(err, launch.ErrContainment) {
		return 0, fmt.Errorf("--contain %s: %w (--contain auto falls back to subreaper)", o.Contain, err)
	}
	return code, err
}

// runOptions is how launch.Run runs p: output, input, logs, and the
// grace and containment asked for.
func runOptions(o *Options, p *Plan) launch.RunOptions {
	ro := launch.RunOptions{
		Stdout: o.Stdout, Stderr: o.Stderr, LogDir: o.LogDir, RanksFilter: o.RanksFilter, Grace: o.Grace,
		Redirects: o.Redirects, Tee: o.Tee, Contain: o.Contain, Forward: o.Forward, PrefixTemplate: o.PrefixTemplate,
		Quiet: o.Quiet, StallTimeout: o.StallTimeout, OnStall: o.OnStall, RestartWait: o.RestartWait,
	}
	if in, ok := o.Stdin.(*os.File); ok {
		ro.Stdin = in
	}
	if p.Torchrun {
		// torchrun got --log_dir, -r, -t and --local_ranks_filter itself:
		// its one process is not filtered or logged by amdrun (nor
		// restarted: the torchrun plan's MaxRestarts is 0).
		ro.LogDir, ro.RanksFilter, ro.Redirects, ro.Tee = "", nil, launch.Streams{}, launch.Streams{}
	}
	// Prefixes tell ranks apart: with one rank on the console there is
	// nothing to tell, and its output can be the terminal itself (issue 15).
	shown := 0
	for _, r := range p.Run.Ranks {
		if ro.RanksFilter == nil || slices.Contains(ro.RanksFilter, r.LocalRank) {
			shown++
		}
	}
	ro.Prefix = !o.NoPrefix && shown > 1
	return ro
}
