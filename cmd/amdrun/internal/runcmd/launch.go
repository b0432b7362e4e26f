package runcmd

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/amdrun/amdrun/cmd/amdrun/internal/cmdutil"
	"github.com/amdrun/amdrun/internal/discover"
	"github.com/amdrun/amdrun/internal/launch"
	"github.com/amdrun/amdrun/internal/launch/lease"
	"github.com/amdrun/amdrun/internal/launch/numabalance"
	"github.com/amdrun/amdrun/internal/selector"
	"github.com/amdrun/amdrun/internal/topology"
)

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
	m, err := o.Topology(ctx)
	if err != nil {
		if !(o.DryRun && o.SourceAuto && errors.Is(err, discover.ErrNoGPU)) {
			return err
		}
		if m, err = discover.Example(); err != nil {
			return err
		}
		o.Warn.Warn("no GPU found on this machine; planning on the bundled example topology (%s)", m.Source)
	}
	env := o.Env()
	mask, err := launch.ParseMask(env, m.Devices)
	if err != nil {
		return err
	}
	req := selector.Request{
		N: o.NGPUs, Devices: mask.Narrow(o.Devices), Exclude: o.Exclude,
		AllowBusy: o.AllowBusy, Order: o.Order,
	}
	if o.Devices != nil && mask.Candidates() != nil && len(req.Devices) == 0 {
		return fmt.Errorf("--devices %s names none of the devices the environment leaves visible (%s)",
			topology.FormatCPUList(o.Devices), topology.FormatCPUList(mask.Candidates()))
	}
	res := launch.Reservation{Model: m, Request: req, Policy: o.Policy, DryRun: o.DryRun, Wait: o.Wait,
		Queued: func(want int, why error) {
			fmt.Fprintf(o.IO.ErrOut, "amdrun: waiting for %d free device(s) (queued, first come first served): %v\n", want, why)
		},
	}
	if !o.NoLease {
		res.Leases, err = o.Leases()
		if errors.Is(err, lease.ErrNotSupported) && o.DryRun {
			err = nil // planning on a system without flock leases: none to respect
		}
		if err != nil {
			return err
		}
		res.Holder = lease.CurrentHolder(nil)
		res.Holder.Command = "amdrun " + strings.Join(o.Args, " ")
	}
	choice, held, err := launch.Reserve(ctx, res)
	if err != nil {
		return err
	}
	if held != nil {
		defer held.Release()
	}

	hostNUMA, err := o.HostNUMA()
	if err != nil {
		o.Warn.Warn("cannot read this host's NUMA nodes, ranks are not bound: %v", err)
		hostNUMA = nil
	}
	plan, err := launch.PlanJob(launch.Job{
		Model: m, Chosen: choice.Devices, Mask: mask, Argv: workerArgv(o), Env: env, HostNUMA: hostNUMA,
		Bind: o.Bind, Mem: o.Mem, NNodes: o.NNodes, NodeRank: o.NodeRank, MasterAddr: o.MasterAddr,
		MasterPort: o.MasterPort, MaxRestarts: o.MaxRestarts,
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
			Module: o.Module, NoPython: o.NoPython, Args: o.Args,
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
		if o.Explain {
			printExplain(o.IO.Out, m, choice)
		}
		return nil
	}
	if o.Explain {
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
	code, err := launch.Run(ctx, run, launch.RunOptions{
		Stdout: o.IO.Out, Stderr: o.IO.ErrOut,
		Prefix:      !o.NoPrefix && len(run.Ranks) > 1,
		LogDir:      o.LogDir,
		RanksFilter: o.RanksFilter,
		Grace:       o.Grace,
		MaxRestarts: restarts,
		Self:        self,
	})
	if err != nil {
		return err
	}
	if code != 0 {
		return &cmdutil.ExitCodeError{Code: code}
	}
	return nil
}
