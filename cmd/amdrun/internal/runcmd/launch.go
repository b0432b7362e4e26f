package runcmd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/amdrun/amdrun/cmd/amdrun/internal/cmdutil"
	"github.com/amdrun/amdrun/internal/discover"
	"github.com/amdrun/amdrun/internal/launch"
	"github.com/amdrun/amdrun/internal/launch/lease"
	"github.com/amdrun/amdrun/internal/launch/numabalance"
	"github.com/amdrun/amdrun/internal/selector"
	"github.com/amdrun/amdrun/internal/topology"
)

// torchVersion asks the worker's interpreter which torch it would import
// (launch.TorchVersionProbe: its start-up, not torch's import), in the
// background; "" when the workers are not python, or it cannot say.
func torchVersion(ctx context.Context, o *Options) <-chan string {
	ch := make(chan string, 1)
	if o.NoPython || o.Run == nil || len(o.Args) == 0 {
		ch <- ""
		return ch
	}
	go func() {
		// An interpreter that takes seconds to start must not hold the job.
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		out, err := o.Run(ctx, o.Python, "-c", launch.TorchVersionProbe)
		if err != nil {
			ch <- ""
			return
		}
		ch <- launch.ParseTorchVersion(out)
	}()
	return ch
}

// canLaunch is launch.Supported; tests of other systems' behaviour set it.
var canLaunch = launch.Supported

// Run chooses devices, plans the ranks and either prints the plan
// (--dry-run) or runs it to the end. It only calls into the packages that
// do the work: launch.Reserve (select and lease), launch.PlanJob, and
// launch.Run.
func Run(ctx context.Context, o *Options) error {
	if !o.DryRun && !canLaunch {
		return fmt.Errorf("starting ranks needs Linux; on this system amdrun only plans (add --dry-run, e.g. with --topology node.json saved by 'amdrun topo --json' on the node)")
	}
	env := o.Env()
	torch := torchVersion(ctx, o) // runs while the node is discovered
	pl, err := place(ctx, o, env)
	if err != nil {
		return err
	}
	if pl.held != nil {
		defer pl.held.Release()
	}
	m, choice, mask := pl.model, pl.choice, pl.mask
	var chosen []int
	perRank := 1
	if choice != nil {
		chosen = choice.Devices
		if o.NProc > 0 && len(chosen) > o.NProc {
			perRank = len(chosen) / o.NProc
		}
	}

	hostNUMA, err := o.HostNUMA()
	if err != nil {
		o.Warn.Warn("cannot read this host's NUMA nodes, ranks are not bound: %v", err)
		hostNUMA = nil
	}
	plan, err := launch.PlanJob(launch.Job{
		Model: m, Chosen: chosen, DevicesPerRank: perRank, CPURanks: pl.cpuRanks, Mask: mask,
		Argv: workerArgv(o), Env: env, HostNUMA: hostNUMA,
		Bind: o.Bind, Mem: o.Mem, NNodes: o.NNodes, NodeRank: o.NodeRank, MasterAddr: o.MasterAddr,
		MasterPort: o.MasterPort, MaxRestarts: o.MaxRestarts, RunID: o.RunID, Role: o.Role,
		VirtualLocalRank: o.VirtualLocalRank, TorchVersion: <-torch,
	})
	if err != nil {
		return err
	}
	for _, w := range plan.Warnings {
		o.Warn.Warn("%s", w)
	}
	run, restarts := plan, o.MaxRestarts
	if o.Launcher == "torchrun" {
		nnodes := fmt.Sprint(o.NNodes)
		if o.ElasticNNodes != "" {
			nnodes = o.ElasticNNodes
		}
		run = launch.TorchrunPlan(plan, launch.Torchrun{
			UserEnv: env, NNodes: nnodes, NodeRank: o.NodeRank, MasterAddr: o.MasterAddr,
			MasterPort: o.MasterPort, Rdzv: o.Rdzv, MaxRestarts: o.MaxRestarts,
			Module: o.Module, NoPython: o.NoPython, Extra: o.TorchrunArgs, Args: o.Args, Agent: agentArgv(o),
		})
		restarts = 0 // torchrun restarts its workers itself
	}
	if o.DryRun {
		if o.Launcher == "torchrun" {
			fmt.Fprintf(o.IO.Out, "Launcher: %s\n", quoteArgv(run.Ranks[0].Argv))
		}
		if o.JSON {
			return printJSON(o, m, choice, plan)
		}
		printPlan(o.IO.Out, m, choice, plan)
		if o.Explain && choice != nil {
			printExplain(o.IO.Out, m, choice)
		}
		return nil
	}
	if o.Explain && choice != nil {
		printExplain(o.IO.ErrOut, m, choice)
	}
	restore, err := numabalance.Apply(o.Root, o.NUMABalancing)
	if err != nil {
		return err
	}
	defer func() {
		if err := restore(); err != nil {
			o.Warn.Warn("%v", err)
		}
	}()
	self, err := o.Executable()
	if err != nil {
		return fmt.Errorf("cannot find amdrun's own binary for binding: %w", err)
	}
	var hold []*os.File
	if pl.held != nil {
		// The processes that watch over the job keep these open, so the
		// devices stay leased while anything of the job runs (issue 13).
		if hold, err = pl.held.Files(); err != nil {
			return err
		}
		defer func() {
			for _, f := range hold {
				f.Close()
			}
		}()
	}
	ro := runOptions(o, run)
	ro.MaxRestarts, ro.Self, ro.Hold = restarts, self, hold
	code, err := launch.Run(ctx, run, ro)
	if errors.Is(err, launch.ErrContainment) {
		return fmt.Errorf("--contain %s: %w (--contain auto falls back to subreaper)", o.Contain, err)
	}
	if err != nil {
		return err
	}
	if code != 0 {
		return &cmdutil.ExitCodeError{Code: code}
	}
	return nil
}

// runOptions is how launch.Run runs the ranks of run: output, input,
// logs, and the grace and containment the flags ask for.
func runOptions(o *Options, run *launch.Plan) launch.RunOptions {
	ro := launch.RunOptions{
		Stdout: o.IO.Out, Stderr: o.IO.ErrOut,
		LogDir:      o.LogDir,
		RanksFilter: o.RanksFilter,
		Grace:       o.Grace,
		Redirects:   o.Redirects,
		Tee:         o.Tee,
		Contain:     o.Contain,
		Forward:     o.Forward, PrefixTemplate: o.PrefixTemplate,
	}
	if in, ok := o.IO.In.(*os.File); ok {
		ro.Stdin = in
	}
	if o.Launcher == "torchrun" {
		// torchrun got --log_dir, -r, -t and --local_ranks_filter itself:
		// its one process is not filtered or logged by amdrun.
		ro.LogDir, ro.RanksFilter, ro.Redirects, ro.Tee = "", nil, launch.Streams{}, launch.Streams{}
	}
	// Prefixes tell ranks apart: with one rank on the console there is
	// nothing to tell, and its output can be the terminal itself (issue 15).
	shown := 0
	for _, r := range run.Ranks {
		if ro.RanksFilter == nil || slices.Contains(ro.RanksFilter, r.LocalRank) {
			shown++
		}
	}
	ro.Prefix = !o.NoPrefix && shown > 1
	return ro
}

// placement is where a job's ranks run: devices chosen on a model (and
// their lease), or CPU ranks on a node without GPUs.
type placement struct {
	model    *topology.Model
	mask     *launch.Mask
	choice   *selector.Choice
	held     *lease.Lease
	cpuRanks int
}

// place finds the ranks' devices: it discovers the node, chooses and
// leases the devices; or, when the flags ask for CPU ranks or the node
// has no GPU (the source left to auto-detection), it plans CPU ranks and
// says so in one line.
func place(ctx context.Context, o *Options, env []string) (*placement, error) {
	if o.CPUOnly {
		return &placement{cpuRanks: o.cpuRanks()}, nil
	}
	m, err := o.Topology(ctx)
	if err != nil {
		if !o.SourceAuto || !errors.Is(err, discover.ErrNoGPU) {
			return nil, err
		}
		switch {
		case o.NProcKind == "gpu":
			return nil, fmt.Errorf("--nproc-per-node gpu: %w", err)
		case o.Devices != nil || o.Exclude != nil:
			return nil, fmt.Errorf("--devices/--exclude name GPUs: %w", err)
		}
		n := o.cpuRanks()
		o.Warn.Warn("no GPU found on this machine: running %d CPU rank(s) (use the gloo backend; --source example plans on the bundled example topology)", n)
		return &placement{cpuRanks: n}, nil
	}
	mask, err := launch.ParseMask(env, m.Devices)
	if err != nil {
		return nil, err
	}
	req := selector.Request{
		N: o.NGPUs, Devices: mask.Narrow(o.Devices), Exclude: o.Exclude,
		AllowBusy: o.AllowBusy, Order: o.Order, Budget: o.SearchBudget,
	}
	if o.Devices != nil && mask.Candidates() != nil && len(req.Devices) == 0 {
		return nil, fmt.Errorf("--devices %s names none of the devices the environment leaves visible (%s)",
			topology.FormatCPUList(o.Devices), topology.FormatCPUList(mask.Candidates()))
	}
	res := launch.Reservation{Model: m, Request: req, Policy: o.Policy, DryRun: o.DryRun, Wait: o.Wait, Refresh: o.Rediscover,
		Queued: func(want int, why error) {
			fmt.Fprintf(o.IO.ErrOut, "amdrun: waiting for %d free device(s) (queued, first come first served): %v\n", want, userError(why))
		},
	}
	if !o.NoLease {
		res.Leases, err = o.Leases()
		if errors.Is(err, lease.ErrNotSupported) && o.DryRun {
			err = nil // planning on a system without flock leases: none to respect
		}
		if err != nil {
			return nil, err
		}
	}
	choice, held, err := launch.Reserve(ctx, res)
	if err != nil {
		return nil, userError(err)
	}
	if o.NProc > 0 && len(choice.Devices)%o.NProc != 0 {
		// Every free device (--ngpus 0 with --nproc-per-node gpu/auto
		// never gets here): cannot happen, but a plan must not be wrong.
		if held != nil {
			held.Release()
		}
		return nil, fmt.Errorf("%d devices do not split over %d ranks", len(choice.Devices), o.NProc)
	}
	return &placement{model: m, mask: mask, choice: choice, held: held}, nil
}

// cpuRanks is the number of CPU ranks: --nproc-per-node N, else one per
// CPU for cpu and auto (as torchrun's os.cpu_count(), but the CPUs amdrun
// may use), else --ngpus, else 1 (torchrun's default).
func (o *Options) cpuRanks() int {
	switch {
	case o.NProc > 0:
		return o.NProc
	case o.NProcKind == "cpu" || o.NProcKind == "auto":
		return max(1, o.NumCPU())
	case o.NGPUs > 0:
		return o.NGPUs
	}
	return 1
}

// userError rewrites the selector's errors, which name its package and
// its terms, in the flags the user can change.
func userError(err error) error {
	var ne *selector.NotEnoughError
	if !errors.As(err, &ne) {
		return err
	}
	msg := strings.TrimPrefix(ne.Error(), "selector: ")
	if ne.Requested > 0 {
		msg = strings.TrimPrefix(msg, fmt.Sprintf("%d devices requested, ", ne.Requested))
		msg = fmt.Sprintf("--ngpus %d: only %s", ne.Requested, msg)
	}
	return &reworded{msg: msg, err: err}
}

// reworded is an error shown with another message.
type reworded struct {
	msg string
	err error
}

func (e *reworded) Error() string { return e.msg }
func (e *reworded) Unwrap() error { return e.err }
