// Package benchcmd is `amdrun bench`: measure this node's copy bandwidth
// between devices and from the host, cache it for selection.
package benchcmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/amdrun/amdrun/cmd/amdrun/internal/cmdutil"
	"github.com/amdrun/amdrun/cmd/amdrun/internal/iostreams"
	"github.com/amdrun/amdrun/internal/bench"
	"github.com/amdrun/amdrun/internal/topology"
	"github.com/spf13/cobra"
)

// Options are the inputs of `amdrun bench`.
type Options struct {
	IO         *iostreams.IOStreams
	Topology   func(context.Context) (*topology.Model, error)
	HostNUMA   func() ([]topology.NUMANode, error)
	Env        func() []string
	Getenv     func(string) string
	Executable func() (string, error)

	Devices []int
	SizeMiB int
	Iters   int
	// Python is the interpreter with torch, resolved (Factory.PythonFrom).
	Python string
	JSON   bool
	NoH2D  bool
	// Tool, when set, measures instead of the PyTorch probe: "rocm_bandwidth_test".
	Tool string
	// MeasureTool runs Tool; nil means bench.MeasureWithTool.
	MeasureTool func(ctx context.Context, m *topology.Model, tool, host string, warn topology.Warner) (*bench.Result, error)
	// Warn receives the tool's recoverable oddities; nil drops them.
	Warn topology.Warner
}

// NewCmdBench returns `amdrun bench`.
func NewCmdBench(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams, Topology: f.Topology, HostNUMA: f.HostNUMA, Env: f.Env, Getenv: f.Getenv, Executable: f.Executable, Warn: f.Warn}
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure copy bandwidth between devices and from each NUMA node",
		Long: `Measure this node with a small PyTorch probe carried inside amdrun and run
with your Python (as the ranks': see --python): device-to-device copy bandwidth for every ordered pair of
devices, and host-to-device bandwidth from each NUMA node (the probe is bound
to each node in turn). The result is cached under $XDG_CACHE_HOME/amdrun/,
keyed by the devices' identities; selection then uses it (--bandwidth auto,
the default, or measured) and --explain says so.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.Tool != "" && opts.Tool != "rocm_bandwidth_test" {
				return cmdutil.FlagErrorf("--tool: want rocm_bandwidth_test, got %q", opts.Tool)
			}
			if opts.SizeMiB < 1 || opts.Iters < 1 {
				return cmdutil.FlagErrorf("--size and --iters must be at least 1")
			}
			opts.Python, _ = f.PythonFrom(opts.Python)
			return cmdutil.Either(runF, Run)(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.Var(cmdutil.Parsed(&opts.Devices, cmdutil.IndexList), "devices", "measure only these devices, e.g. 0-3")
	fl.IntVar(&opts.SizeMiB, "size", 256, "copy size in MiB")
	fl.IntVar(&opts.Iters, "iters", 10, "timed copies per figure")
	fl.StringVar(&opts.Python, "python", "", "Python interpreter with torch (default $PYTHON_EXEC, else the active environment's: $VIRTUAL_ENV/bin/python, $CONDA_PREFIX/bin/python; else python3 on PATH)")
	fl.BoolVar(&opts.JSON, "json", false, "print the result as JSON")
	fl.BoolVar(&opts.NoH2D, "no-host", false, "skip the host-to-device measurement")
	fl.StringVar(&opts.Tool, "tool", "", "measure with this tool instead of the PyTorch probe: rocm_bandwidth_test")
	return cmd
}

// Run measures, caches and prints.
func Run(ctx context.Context, o *Options) error {
	m, err := o.Topology(ctx)
	if err != nil {
		return err
	}
	host, _ := os.Hostname()
	if o.Tool != "" {
		measure := o.MeasureTool
		if measure == nil {
			if _, err := exec.LookPath(o.Tool); err != nil {
				return fmt.Errorf("%s: %w", o.Tool, topology.ErrToolNotFound)
			}
			measure = bench.MeasureWithTool
		}
		fmt.Fprintf(o.IO.ErrOut, "amdrun bench: running %s (this takes a few minutes)\n", o.Tool)
		// m keeps its theoretical links: the table's last column shows them.
		r, err := measure(ctx, m, o.Tool, host, o.Warn)
		if err != nil {
			return err
		}
		return finish(o, m, r)
	}
	spec := bench.StepsSpec{Devices: o.Devices, Python: o.Python, SizeMiB: o.SizeMiB, Iters: o.Iters, Env: o.Env()}
	if !o.NoH2D {
		spec.HostNUMA, spec.Self = o.HostNUMA, o.Executable
	}
	steps, devs, err := bench.Steps(m, spec)
	var de *bench.DeviceError
	if errors.As(err, &de) {
		return &cmdutil.FlagError{Err: fmt.Errorf("--devices: %w", err)}
	}
	if err != nil {
		return err
	}
	r := &bench.Result{Host: host, Keys: m.Keys(), Devices: devs, SizeMiB: o.SizeMiB, Iters: o.Iters}
	err = bench.RunSteps(ctx, steps, r, progress(o))
	if o.IO.IsStderrTTY() {
		fmt.Fprintln(o.IO.ErrOut) // end the progress bar's line
	}
	if err != nil {
		return err
	}
	return finish(o, m, r)
}

// progress draws a bar on a terminal, else prints a line each quarter.
func progress(o *Options) bench.Progress {
	if o.IO.IsStderrTTY() {
		return func(done, total int, el time.Duration) {
			width := 30
			fill := width * done / max(total, 1)
			fmt.Fprintf(o.IO.ErrOut, "\r[%s%s] %d/%d figures, %.1fs", strings.Repeat("#", fill), strings.Repeat(".", width-fill), done, total, el.Seconds())
		}
	}
	last := -1
	return func(done, total int, el time.Duration) {
		if q := 4 * done / max(total, 1); q != last {
			last = q
			fmt.Fprintf(o.IO.ErrOut, "amdrun bench: %d/%d figures, %.1fs\n", done, total, el.Seconds())
		}
	}
}

func printResult(o *Options, m *topology.Model, r *bench.Result, path string) {
	w := o.IO.Out
	if r.SizeMiB > 0 {
		fmt.Fprintf(w, "Device-to-device copy bandwidth, GB/s (row: from, column: to; %d MiB x %d)\n", r.SizeMiB, r.Iters)
	} else {
		fmt.Fprintln(w, "Device-to-device peak copy bandwidth, GB/s (row: from, column: to; rocm_bandwidth_test)")
	}
	tw := gpuTable(w, r.Devices)
	fmt.Fprintln(tw, "theoretical")
	for i, a := range r.Devices {
		fmt.Fprintf(tw, "GPU%d\t", a)
		var theo []string
		for j, b := range r.Devices {
			if i == j {
				fmt.Fprint(tw, "X\t")
				continue
			}
			switch {
			case slices.Contains(r.NoP2P, [2]int{min(i, j), max(i, j)}): // lower first
				fmt.Fprint(tw, "noP2P\t")
			case r.D2D[i][j] <= 0:
				fmt.Fprint(tw, "-\t")
			default:
				fmt.Fprintf(tw, "%.1f\t", r.D2D[i][j]/1000)
			}
			if l := m.Link(a, b); l != nil && j > i {
				theo = append(theo, fmt.Sprintf("%d-%d %g", a, b, float64(l.MaxBandwidth)/1000))
			}
		}
		fmt.Fprintln(tw, strings.Join(theo, ", "))
	}
	tw.Flush()
	if len(r.NoP2P) > 0 {
		fmt.Fprintln(w, "noP2P = no peer-to-peer access: copies go through host memory.")
	}
	if len(r.H2D) > 0 {
		fmt.Fprintln(w, "\nHost-to-device copy bandwidth, GB/s (row: NUMA node the probe was bound to)")
		tw = gpuTable(w, r.Devices)
		fmt.Fprintln(tw)
		for _, id := range slices.Sorted(maps.Keys(r.H2D)) {
			fmt.Fprintf(tw, "node %d\t", id)
			for _, v := range r.H2D[id] {
				fmt.Fprintf(tw, "%.1f\t", v/1000)
			}
			fmt.Fprintln(tw)
		}
		tw.Flush()
	}
	if path != "" {
		fmt.Fprintf(w, "\nCached in %s; selection uses it (--bandwidth auto).\n", path)
	}
}

// gpuTable is a table with a column per device; the caller ends the header.
func gpuTable(w io.Writer, devs []int) *tabwriter.Writer {
	tw := cmdutil.NewTable(w)
	fmt.Fprint(tw, "\t")
	for _, d := range devs {
		fmt.Fprintf(tw, "GPU%d\t", d)
	}
	return tw
}

// finish caches a measurement for this host and prints it.
func finish(o *Options, m *topology.Model, r *bench.Result) error {
	path := ""
	dir, err := bench.CacheDir(o.Getenv)
	if err == nil {
		path = bench.CachePath(dir, r.Host, r.Keys)
		err = bench.Save(path, r)
	}
	if err != nil {
		cmdutil.Warnf(o.IO, "result not cached: %v", err)
		path = ""
	}
	if o.JSON {
		return cmdutil.PrintJSON(o.IO.Out, r)
	}
	printResult(o, m, r, path)
	return nil
}
