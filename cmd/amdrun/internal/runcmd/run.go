// Package runcmd is amdrun's root command, the launcher. Its flags bind
// into job.Options and job.CommandLine; job checks them (Options.Resolve)
// and runs the pipeline (job.Preview, job.Run).
package runcmd

import (
	"context"
	"errors"
	"runtime"
	"strings"

	"github.com/amdrun/amdrun/cmd/amdrun/internal/cmdutil"
	"github.com/amdrun/amdrun/cmd/amdrun/internal/iostreams"
	"github.com/amdrun/amdrun/internal/job"
	"github.com/amdrun/amdrun/internal/lease"
	"github.com/spf13/cobra"
)

// Options are the launch command's inputs: job.Options and its own.
type Options struct {
	IO *iostreams.IOStreams
	job.Options

	// DryRun prints the plan instead of running it; JSON as job.Document.
	DryRun, JSON bool
	// LeaseDir is --lease-dir ("": the factory's default).
	LeaseDir string
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
bandwidths are compared in levels 2.5% apart. Up to 16 candidates every
set is scored; beyond, the search stops at
--search-work with the best set found (a work count, so the same request
gets the same devices on a busy node; --search-budget is a time cap on top).

Exit status: the first failing rank's exit code (128+signal if it was
killed); 2 for a usage error; 1 when amdrun itself fails (not enough free
devices, a vendor tool failed, ...).`

const example = `  amdrun --ngpus 4 train.py --lr 3e-4
  amdrun -n 2 --policy ring examples/allreduce_check.py /tmp
  amdrun --ngpus 4 --dry-run --explain examples/allreduce.py
  amdrun --devices 0-3 --exclude 2 --no-python -- hostname
  amdrun -n 4 --nproc-per-node 1 --no-python vllm serve MODEL -tp 4
  amdrun --ngpus 0 --nproc-per-node 4 examples/allreduce_check.py /tmp
  amdrun --topology node.json --ngpus 8 --dry-run --json train.py`

// NewCmdRun returns the root launch command; runF replaces Run in tests.
func NewCmdRun(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams}
	opts.Deps = job.Deps{
		Stdout: f.IOStreams.Out, Stderr: f.IOStreams.ErrOut, Stdin: f.IOStreams.In,
		Topology: f.Topology, Rediscover: f.Rediscover, Run: f.Run, Env: f.Env, Executable: f.Executable,
		Warn: f.Warn, HostNUMA: f.HostNUMA, HostCPUGroups: f.HostCPUGroups, OwnCPUs: f.OwnCPUs, NumCPU: runtime.NumCPU,
	}
	l := &job.CommandLine{}
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
			opts.SourceAuto = f.Topo.File == "" && (f.Topo.Source == "" || f.Topo.Source == "auto")
			opts.Root, opts.Quiet = f.SysfsRoot(), f.IOStreams.Quiet
			// A dry run takes no lease and makes no directory.
			opts.Leases = func(create bool) (*lease.Dir, error) { return f.OpenLeases(opts.LeaseDir, create) }
			if err := applyPET(cmd.Flags(), f.Env()); err != nil {
				return err
			}
			if err := opts.Resolve(cmd.Context(), l); err != nil {
				return usageError(err)
			}
			if err := mistypedCommand(cmd, &opts.Options); err != nil {
				return err
			}
			if opts.JSON && !opts.DryRun {
				return cmdutil.FlagErrorf("--json needs --dry-run")
			}
			if len(opts.Args) == 0 && !opts.DryRun {
				return cmdutil.FlagErrorf("missing SCRIPT: amdrun [flags] SCRIPT [ARGS...] (see amdrun --help)")
			}
			opts.Python, opts.PythonFrom = f.PythonFrom(opts.Python)
			return cmdutil.Either(runF, Run)(cmd.Context(), opts)
		},
	}
	cmd.SetFlagErrorFunc(cmdutil.FlagParseError) // every command's, as each inherits it
	cmd.SetGlobalNormalizationFunc(normalizeFlag)
	fl := cmd.Flags()
	fl.SetInterspersed(false) // flags after SCRIPT belong to the script
	for _, add := range flagTable {
		add(decl{cmd: cmd, fl: fl, line: l}, opts)
	}
	fl.SortFlags = false
	for _, e := range completionOnly { // EnumVar completes the enums
		cmdutil.Complete(cmd, e)
	}
	return cmd
}

// mistypedCommand is the error for a missing SCRIPT near a subcommand's
// name (amdrun tpo), nil for any other. A SCRIPT after "--" is the
// user's word that it is one, and so is a path (t.py is near topo).
func mistypedCommand(cmd *cobra.Command, o *job.Options) error {
	s := o.MissingScript()
	if s == "" || cmd.ArgsLenAtDash() == 0 || strings.ContainsAny(s, "./") {
		return nil
	}
	return cmdutil.Suggest(cmd, s)
}

// usageError is err with job's usage errors made FlagErrors.
func usageError(err error) error {
	var ue *job.UsageError
	if errors.As(err, &ue) {
		return &cmdutil.FlagError{Err: err}
	}
	return err
}

// Run prints the plan (--dry-run) or runs the job to its end, its first
// failing rank's exit status returned as an ExitCodeError.
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
