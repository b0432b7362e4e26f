// Package stackscmd is `amdrun stacks`: every rank's Python stacks of a
// running job, merged.
package stackscmd

import (
	"context"
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/amdrun/amdrun/cmd/amdrun/internal/cmdutil"
	"github.com/amdrun/amdrun/cmd/amdrun/internal/iostreams"
	"github.com/amdrun/amdrun/internal/launch"
)

// Options are the inputs of `amdrun stacks`.
type Options struct {
	IO *iostreams.IOStreams
	// PID is the job's amdrun; 0: the caller's only running job.
	PID int
	// Find and Ask are launch.FindJob and launch.AskStacks.
	Find func(pid int) (launch.Job, error)
	Ask  func(launch.Job, bool) (string, error)
	// Native adds native frames through py-spy (--native).
	Native bool
}

// NewCmdStacks returns `amdrun stacks`; runF replaces Run in tests.
func NewCmdStacks(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams, Find: launch.FindJob, Ask: launch.AskStacks}
	cmd := &cobra.Command{
		Use:   "stacks [JOB]",
		Short: "Print every rank's Python stacks of a running job, merged",
		Long: `Print the Python stack of every thread of every rank of a running job without
stopping it: ranks with the same stacks form one group, printed once with its
rank list, the biggest group first; the odd groups are marked [odd]. JOB is the
pid of the job's amdrun (as amdrun ps shows it); without it, your only running
job. Only the job's owner and root can take its stacks. --native adds each
rank's native frames, read by py-spy (py-spy dump --native) where the job's
PATH has it.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				pid, err := strconv.Atoi(args[0])
				if err != nil || pid <= 0 {
					return cmdutil.FlagErrorf("JOB must be the pid of the job's amdrun, got %q", args[0])
				}
				opts.PID = pid
			}
			return cmdutil.Either(runF, Run)(cmd.Context(), opts)
		},
	}
	cmd.Flags().BoolVar(&opts.Native, "native", false, "add each rank's native frames through py-spy (on the job's PATH)")
	return cmd
}

// Run finds the job, asks it for its stacks and prints them.
func Run(_ context.Context, opts *Options) error {
	j, err := opts.Find(opts.PID)
	if err != nil {
		return fmt.Errorf("stacks: %w", err)
	}
	text, err := opts.Ask(j, opts.Native)
	if err != nil {
		return fmt.Errorf("stacks: %w", err)
	}
	_, err = fmt.Fprint(opts.IO.Out, text)
	return err
}
