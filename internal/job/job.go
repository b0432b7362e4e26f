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
// is not there (issue 31).
var ErrNoScript = errors.New("no such file")

// MissingScript is the Python script the ranks would run that is not
// there, else "" (also for -m and --no-python).
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
// taking none) and plans the ranks, starting nothing: `amdrun --dry-run`.
// It does not look for SCRIPT: the plan may be for another node.
func Preview(ctx context.Context, o *Options) (*Plan, error) {
	p, err := prepare(ctx, o, true)
	if err != nil {
		return nil, err
	}
	p.release()
	return p, nil
}

// Run reserves and plans as Preview does, taking the lease, applies NUMA
// balancing and supervises the ranks (or torchrun) to their end, the
// lease held until the job's last process is gone. code is the first
// failing rank's exit status; err is amdrun's own failure.
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

// prepare is the pipeline up to the plan, which holds the lease, if
// any, until release.
func prepare(ctx context.Context, o *Options, dryRun bool) (*Plan, error) {
	env := o.Env()
	torch := torchVersion(ctx, o) // runs while the node is discovered
	pl, err := place(ctx, o, env, dryRun)
	if err != nil {
		return nil, err
	}
	// A host that does not tell its NUMA nodes (a container) leaves the
	// ranks unbound, said only with --bind.
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

// ompNote is the plan's OMP_NUM_THREADS note where it is worth a line
// (issue 31): Python ranks that run, not under torchrun.
func ompNote(o *Options, dryRun bool, note string) string {
	if dryRun || o.NoPython || o.Launcher == "torchrun" {
		return ""
	}
	return note
}

// torchrunSettings hands this node's plan to torchrun, or to torch's
// agent (Options.Agent), which starts bound workers through amdrun's
// bind shim.
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

// supervise runs p under launch.Run.
func supervise(ctx context.Context, o *Options, p *Plan) (int, error) {
	self, err := o.Executable()
	if err != nil {
		return 0, fmt.Errorf("cannot find amdrun's own binary for binding: %w", err)
	}
	// The job's watchers keep the leases' files open while anything of
	// the job runs (issue 13).
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

// runOptions is how launch.Run runs p.
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
		// torchrun got --log_dir, -r, -t and --local_ranks_filter itself.
		ro.LogDir, ro.RanksFilter, ro.Redirects, ro.Tee = "", nil, launch.Streams{}, launch.Streams{}
	}
	// One rank on the console needs no prefix and can have the terminal
	// itself (issue 15).
	shown := 0
	for _, r := range p.Run.Ranks {
		if ro.RanksFilter == nil || slices.Contains(ro.RanksFilter, r.LocalRank) {
			shown++
		}
	}
	ro.Prefix = !o.NoPrefix && shown > 1
	return ro
}
