// Package root assembles amdrun's command tree and maps errors to exit
// codes.
package root

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/amdrun/amdrun/cmd/amdrun/internal/benchcmd"
	"github.com/amdrun/amdrun/cmd/amdrun/internal/cmdutil"
	"github.com/amdrun/amdrun/cmd/amdrun/internal/doctor"
	"github.com/amdrun/amdrun/cmd/amdrun/internal/leasecmd"
	"github.com/amdrun/amdrun/cmd/amdrun/internal/pscmd"
	"github.com/amdrun/amdrun/cmd/amdrun/internal/runcmd"
	"github.com/amdrun/amdrun/cmd/amdrun/internal/stackscmd"
	"github.com/amdrun/amdrun/cmd/amdrun/internal/topocmd"
	"github.com/amdrun/amdrun/cmd/amdrun/internal/version"
	"github.com/amdrun/amdrun/internal/discover"
	"github.com/amdrun/amdrun/internal/job"
	"github.com/amdrun/amdrun/internal/launch"
	"github.com/amdrun/amdrun/internal/selector"
	"github.com/spf13/cobra"
)

// The root's persistent flags that take words: --source's are discover's
// (discover.ValidSource checks them), --bandwidth's the factory's modes.
var (
	SourceFlag    = &cmdutil.Enum{Name: "source", Words: sourceWords()}
	BandwidthFlag = &cmdutil.Enum{Name: "bandwidth", Words: []cmdutil.Word{
		{Name: "auto", Help: "measured when amdrun bench has a result for these devices"}, {Name: "measured"}, {Name: "theoretical"},
	}}
)

// sourceWords are discover.Sources, auto explained.
func sourceWords() []cmdutil.Word {
	out := cmdutil.Words(discover.Sources...)
	out[slices.Index(discover.Sources, "auto")].Help = "KFD sysfs, then amd-smi, rocm-smi, nvidia-smi, the PCI tree"
	return out
}

// NewCmdRoot returns the launcher with every subcommand and the topology flags.
func NewCmdRoot(f *cmdutil.Factory) *cobra.Command {
	cmd := runcmd.NewCmdRun(f, nil)
	cmd.Version = f.Version
	// --version prints what `amdrun version` prints.
	cmd.SetVersionTemplate(version.Of(f.Version).Line() + "\n")
	pf := cmd.PersistentFlags()
	cmdutil.PersistentStringEnumFlag(cmd, &f.Topo.Source, SourceFlag, "auto", "topology source: %s")
	pf.StringVar(&f.Topo.SysfsRoot, "sysfs-root", "", "read sysfs (and /proc) under `DIR` (default $AMDRUN_SYSFS_ROOT, else /)")
	cmdutil.PersistentStringEnumFlag(cmd, &f.Topo.Bandwidth, BandwidthFlag, "auto", "bandwidth for selection: %s")
	pf.BoolVarP(&f.IOStreams.Quiet, "quiet", "q", false, "print no warnings (errors still print)")
	pf.StringVar(&f.Topo.File, "topology", "", "read the topology from `FILE`, saved with 'amdrun topo --json' (here or on another machine)")
	cmd.PersistentPreRunE = func(c *cobra.Command, args []string) error {
		if err := discover.ValidSource(f.Topo.Source); err != nil {
			return &cmdutil.FlagError{Err: fmt.Errorf("--source: %w", err)}
		}
		switch {
		case f.Topo.Source == "file" && f.Topo.File == "":
			return cmdutil.FlagErrorf("--source file needs --topology FILE")
		case f.Topo.File != "" && f.Topo.Source != "auto" && f.Topo.Source != "file" && f.Topo.Source != "":
			return cmdutil.FlagErrorf("--topology reads a saved file: it cannot be used with --source %s", f.Topo.Source)
		}
		if !slices.Contains(BandwidthFlag.Values(), f.Topo.Bandwidth) {
			return BandwidthFlag.Err(f.Topo.Bandwidth)
		}
		return nil
	}
	// Help wrapped to the terminal (80 columns for a pipe).
	width := f.IOStreams.Width()
	cmd.SetUsageTemplate(strings.ReplaceAll(cmd.UsageTemplate(), ".FlagUsages", fmt.Sprintf(".FlagUsagesWrapped %d", width)))
	help := cmd.HelpFunc()
	cmd.SetHelpFunc(func(c *cobra.Command, args []string) {
		c.Long = wrapLines(c.Long, width)
		help(c, args)
	})
	cmd.SetOut(f.IOStreams.Out)
	cmd.SetErr(f.IOStreams.ErrOut)
	cmd.AddCommand(topocmd.NewCmdTopo(f, nil), version.NewCmdVersion(f), pscmd.NewCmdPs(f, nil), stackscmd.NewCmdStacks(f, nil),
		benchcmd.NewCmdBench(f, nil), doctor.NewCmdDoctor(f, nil), leasecmd.NewCmdLease(f, nil))
	// cobra adds `completion`: an unknown shell is a usage error, not a
	// help page and exit 0.
	cmd.InitDefaultCompletionCmd()
	for _, c := range cmd.Commands() {
		c.SilenceErrors, c.SilenceUsage = true, true
		if c.Name() == "completion" {
			c.Args = cobra.ArbitraryArgs
			c.RunE = func(c *cobra.Command, args []string) error {
				if len(args) > 0 {
					return cmdutil.FlagErrorf("completion: unknown shell %q (bash, zsh, fish, powershell)", args[0])
				}
				return cmdutil.FlagErrorf("completion: name a shell: bash, zsh, fish or powershell")
			}
		}
	}
	return cmd
}

// wrapLines breaks each line of s wider than width at its last space
// that fits, the rest indented as the line was.
func wrapLines(s string, width int) string {
	lines := strings.Split(s, "\n")
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		body := strings.TrimLeft(l, " ")
		indent := l[:len(l)-len(body)]
		if len(l) <= width || !strings.Contains(strings.TrimRight(body, " "), " ") {
			continue // fits, or one word: nothing to break
		}
		cut := strings.LastIndexByte(l[:width+1], ' ')
		if cut <= len(indent) { // a word wider than the line: after it
			cut = len(indent) + strings.IndexByte(body, ' ')
		}
		lines[i] = l[:cut]
		lines = slices.Insert(lines, i+1, indent+strings.TrimLeft(l[cut+1:], " "))
	}
	return strings.Join(lines, "\n")
}

// Main runs amdrun with os.Args and returns the exit status; main() only
// passes it to os.Exit. stampedVersion is the version the build stamped
// into main ("" when none: version.FromBuild).
func Main(stampedVersion string) int {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case launch.ShimArg: // the re-executed bind shim: bind this process, then exec the rank
			return launch.ShimMain(os.Args[2:])
		case launch.KeeperArg: // the init of a job's PID namespace (see launch.Containment)
			return launch.KeeperMain(os.Args[2:])
		}
	}
	f := cmdutil.New(version.Current(stampedVersion))
	cmd := NewCmdRoot(f)
	// torchrun's argparse takes --nproc_per_nod for --nproc_per_node.
	args, err := runcmd.ExpandAbbrev(cmd, os.Args[1:])
	if err == nil {
		cmd.SetArgs(args)
		err = cmd.ExecuteContext(context.Background())
	}
	return exitCode(f, err)
}

func exitCode(f *cmdutil.Factory, err error) int {
	var ec *cmdutil.ExitCodeError
	switch {
	case err == nil:
		return cmdutil.ExitOK
	case errors.As(err, &ec):
		return ec.Code
	case errors.Is(err, cmdutil.ErrSilent):
		return cmdutil.ExitError
	}
	fmt.Fprintf(f.IOStreams.ErrOut, "amdrun: %v\n", oneLine(err))
	// An error that carries amdrun's own status (128+n for a signal that
	// ended a queued job) has ExitStatus. Not ExitCode: a vendor tool's
	// *exec.ExitError has that (TestBadToolOutputOneLine).
	var fe *cmdutil.FlagError
	var coded interface{ ExitStatus() int }
	switch {
	case errors.As(err, &fe) || isCobraUsage(err):
		fmt.Fprintln(f.IOStreams.ErrOut, "Run 'amdrun --help' for usage.")
		return cmdutil.ExitUsage
	case errors.As(err, &coded):
		return coded.ExitStatus()
	case slices.ContainsFunc(usageErrors, func(t error) bool { return errors.Is(err, t) }):
		return cmdutil.ExitUsage
	}
	return cmdutil.ExitError
}

// internalPrefix matches amdrun's package names leading an error or one
// of its ": " parts: the user can change flags, not packages.
var internalPrefix = regexp.MustCompile(`(^|: )(launch|selector): `)

// usageErrors are the request's errors, not the machine's: ExitUsage.
var usageErrors = []error{selector.ErrBadRequest, selector.ErrUnknownPolicy, job.ErrNoScript}

// isCobraUsage recognises cobra's argument errors, which are not FlagErrors.
func isCobraUsage(err error) bool {
	s := err.Error()
	return strings.HasPrefix(s, "unknown command") || strings.Contains(s, "arg(s), received")
}

// oneLine is err's first line without amdrun's package names.
func oneLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	// Twice: a removed prefix can leave another at the start.
	for range 2 {
		s = internalPrefix.ReplaceAllString(s, "$1")
	}
	return s
}
