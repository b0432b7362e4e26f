// Package benchcmd is `amdrun bench`: measure device-to-device and
// host-to-device copy bandwidth on this node with PyTorch, cache it, and
// let selection use it.
package benchcmd

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/amdrun/amdrun/cmd/amdrun/internal/cmdutil"
	"github.com/amdrun/amdrun/cmd/amdrun/internal/iostreams"
	"github.com/amdrun/amdrun/internal/bench"
	"github.com/amdrun/amdrun/internal/launch"
	"github.com/amdrun/amdrun/internal/topology"
	"github.com/amdrun/amdrun/internal/topology/rbt"
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
	Python  string
	JSON    bool
	NoH2D   bool
	// Tool, when set, is a measuring tool to run instead of the PyTorch
	// probe: "rocm_bandwidth_test".
	Tool string
}

// NewCmdBench returns `amdrun bench`.
func NewCmdBench(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams, Topology: f.Topology, HostNUMA: f.HostNUMA, Env: f.Env, Getenv: f.Getenv, Executable: f.Executable}
	var devices string
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure copy bandwidth between devices and from each NUMA node, for selection",
		Long: `Measure this node with a small PyTorch probe carried inside amdrun and run
with your python3: device-to-device copy bandwidth for every ordered pair of
devices, and host-to-device bandwidth from each NUMA node (the probe is bound
to each node in turn). The result is cached under $XDG_CACHE_HOME/amdrun/,
keyed by the devices' identities; selection then uses it (--bandwidth auto,
the default, or measured) and --explain says so.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("devices") {
				l, err := topology.ParseCPUList(devices)
				if err != nil || len(l) == 0 {
					return cmdutil.FlagErrorf("--devices: want indices like 0,2,4-7, got %q", devices)
				}
				opts.Devices = l
			}
			if opts.Tool != "" && opts.Tool != "rocm_bandwidth_test" {
				return cmdutil.FlagErrorf("--tool: want rocm_bandwidth_test, got %q", opts.Tool)
			}
			if opts.SizeMiB < 1 || opts.Iters < 1 {
				return cmdutil.FlagErrorf("--size and --iters must be at least 1")
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return Run(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&devices, "devices", "", "measure only these devices, e.g. 0-3")
	fl.IntVar(&opts.SizeMiB, "size", 256, "copy size in MiB")
	fl.IntVar(&opts.Iters, "iters", 10, "timed copies per figure")
	fl.StringVar(&opts.Python, "python", "", "Python interpreter with torch (default $PYTHON_EXEC, else python3)")
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
	if o.Tool != "" {
		return runTool(ctx, o, m)
	}
	devs := o.Devices
	if devs == nil {
		for i := range m.Devices {
			devs = append(devs, i)
		}
	}
	if len(devs) < 1 {
		return fmt.Errorf("bench: no devices to measure")
	}
	keys := m.Keys()
	var runtime []string
	for _, d := range devs {
		if d < 0 || d >= m.N() {
			return &cmdutil.FlagError{Err: fmt.Errorf("--devices: device %d does not exist (%d devices)", d, m.N())}
		}
		runtime = append(runtime, fmt.Sprint(m.Devices[d].RuntimeIndex))
	}
	py := o.Python
	if py == "" {
		py = o.Getenv("PYTHON_EXEC")
	}
	if py == "" {
		py = "python3"
	}
	vis := strings.Join(runtime, ",")
	env := append(append([]string(nil), o.Env()...), "CUDA_VISIBLE_DEVICES="+vis, "HIP_VISIBLE_DEVICES="+vis)
	if m.Vendor == topology.VendorNVIDIA {
		env = append(env, "CUDA_DEVICE_ORDER=PCI_BUS_ID")
	}
	probe := func(mode string) []string {
		return []string{py, "-c", bench.Probe(), mode, fmt.Sprint(o.SizeMiB), fmt.Sprint(o.Iters)}
	}
	steps := []bench.Step{{Argv: probe("d2d"), Env: env, NUMA: -1, Mode: "d2d"}}
	if !o.NoH2D {
		nodes, err := o.HostNUMA()
		if err != nil {
			return fmt.Errorf("bench: host NUMA nodes: %w", err)
		}
		self, err := o.Executable()
		if err != nil {
			return err
		}
		for _, n := range nodes {
			if len(n.CPUs) == 0 {
				continue
			}
			argv := launch.ShimArgv(self, n.CPUs, []int{n.ID}, launch.MemBind, probe("h2d"))
			steps = append(steps, bench.Step{Argv: argv, Env: env, NUMA: n.ID, Mode: "h2d"})
		}
	}
	host, _ := os.Hostname()
	r := &bench.Result{Host: host, Keys: keys, Devices: devs, SizeMiB: o.SizeMiB, Iters: o.Iters}
	var progress bench.Progress
	if o.IO.IsStderrTTY() {
		progress = func(done, total int, el time.Duration) {
			width := 30
			fill := width * done / max(total, 1)
			fmt.Fprintf(o.IO.ErrOut, "\r[%s%s] %d/%d figures, %.1fs", strings.Repeat("#", fill), strings.Repeat(".", width-fill), done, total, el.Seconds())
		}
	} else {
		last := -1
		progress = func(done, total int, el time.Duration) {
			if q := 4 * done / max(total, 1); q != last {
				last = q
				fmt.Fprintf(o.IO.ErrOut, "amdrun bench: %d/%d figures, %.1fs\n", done, total, el.Seconds())
			}
		}
	}
	if err := bench.RunSteps(ctx, steps, r, progress, nil); err != nil {
		if o.IO.IsStderrTTY() {
			fmt.Fprintln(o.IO.ErrOut)
		}
		return err
	}
	if o.IO.IsStderrTTY() {
		fmt.Fprintln(o.IO.ErrOut)
	}
	return finish(o, m, r, host)
}

func print(o *Options, m *topology.Model, r *bench.Result, path string) {
	w := o.IO.Out
	if r.SizeMiB > 0 {
		fmt.Fprintf(w, "Device-to-device copy bandwidth, GB/s (row: from, column: to; %d MiB x %d)\n", r.SizeMiB, r.Iters)
	} else {
		fmt.Fprintln(w, "Device-to-device peak copy bandwidth, GB/s, from rocm_bandwidth_test (faster direction above the diagonal)")
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "\t")
	for _, d := range r.Devices {
		fmt.Fprintf(tw, "GPU%d\t", d)
	}
	fmt.Fprintln(tw, "theoretical")
	for i, a := range r.Devices {
		fmt.Fprintf(tw, "GPU%d\t", a)
		var theo []string
		for j, b := range r.Devices {
			if i == j {
				fmt.Fprint(tw, "X\t")
				continue
			}
			fmt.Fprintf(tw, "%.1f\t", r.D2D[i][j]/1000)
			if l := m.Link(a, b); l != nil && j > i {
				theo = append(theo, fmt.Sprintf("%d-%d %g", a, b, float64(l.MaxBandwidth)/1000))
			}
		}
		fmt.Fprintln(tw, strings.Join(theo, ", "))
	}
	tw.Flush()
	if len(r.H2D) > 0 {
		fmt.Fprintln(w, "\nHost-to-device copy bandwidth, GB/s (row: NUMA node the probe was bound to)")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprint(tw, "\t")
		for _, d := range r.Devices {
			fmt.Fprintf(tw, "GPU%d\t", d)
		}
		fmt.Fprintln(tw)
		for _, id := range r.NUMAIDs() {
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

// runTool measures with rocm_bandwidth_test: its peak copy bandwidth
// matrices replace the model's theoretical links, and the result is cached
// like the probe's.
func runTool(ctx context.Context, o *Options, m *topology.Model) error {
	if _, err := exec.LookPath(o.Tool); err != nil {
		return fmt.Errorf("%s: %w", o.Tool, topology.ErrToolNotFound)
	}
	fmt.Fprintf(o.IO.ErrOut, "amdrun bench: running %s (this takes a few minutes)\n", o.Tool)
	out, err := bench.RunTool(ctx, o.Tool)
	if err != nil {
		return err
	}
	res, err := rbt.Parse(bytes.NewReader(out))
	if err != nil {
		return err
	}
	if err := rbt.Apply(m, res, nil); err != nil {
		return err
	}
	host, _ := os.Hostname()
	return finish(o, m, bench.FromModel(m, host), host)
}

// finish caches a measurement for this host and prints it.
func finish(o *Options, m *topology.Model, r *bench.Result, host string) error {
	path := ""
	dir, err := bench.CacheDir(o.Getenv)
	if err == nil {
		path = bench.CachePath(dir, host, r.Keys)
		err = bench.Save(path, r)
	}
	if err != nil {
		fmt.Fprintf(o.IO.ErrOut, "amdrun: warning: result not cached: %v\n", err)
	}
	if o.JSON {
		enc := json.NewEncoder(o.IO.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	print(o, m, r, path)
	return nil
}
