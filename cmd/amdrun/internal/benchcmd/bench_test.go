package benchcmd_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/amdrun/amdrun/cmd/amdrun/internal/benchcmd"
	"github.com/amdrun/amdrun/cmd/amdrun/internal/cmdtest"
	"github.com/amdrun/amdrun/cmd/amdrun/internal/cmdutil"
	"github.com/amdrun/amdrun/internal/bench"
	"github.com/amdrun/amdrun/internal/discover"
	"github.com/amdrun/amdrun/internal/testutil"
	"github.com/amdrun/amdrun/internal/topology"
)

func newFactory() *cmdutil.Factory {
	ios, _, _, _ := cmdtest.Streams()
	return &cmdutil.Factory{IOStreams: ios, Env: func() []string { return nil }}
}

func TestNewCmdBenchFlags(t *testing.T) {
	type want struct {
		Devices []int
		SizeMiB int
		Iters   int
		Python  string
		JSON    bool
		NoH2D   bool
	}
	tests := []struct {
		name string
		args []string
		want want
	}{
		{"defaults", nil, want{SizeMiB: 256, Iters: 10, Python: "python3"}},
		{"devices", []string{"--devices", "0-3,6"}, want{Devices: []int{0, 1, 2, 3, 6}, SizeMiB: 256, Iters: 10, Python: "python3"}},
		{"everything", []string{"--size", "64", "--iters", "3", "--python", "/opt/py", "--json", "--no-host"},
			want{SizeMiB: 64, Iters: 3, Python: "/opt/py", JSON: true, NoH2D: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got *benchcmd.Options
			cmd := benchcmd.NewCmdBench(newFactory(), func(ctx context.Context, o *benchcmd.Options) error {
				got = o
				return nil
			})
			cmd.SetArgs(tt.args)
			if err := cmd.ExecuteContext(context.Background()); err != nil {
				t.Fatalf("%q: %v", tt.args, err)
			}
			g := want{got.Devices, got.SizeMiB, got.Iters, got.Python, got.JSON, got.NoH2D}
			if !reflect.DeepEqual(g, tt.want) {
				t.Errorf("%q:\n got %+v\nwant %+v", tt.args, g, tt.want)
			}
		})
	}
}

func TestNewCmdBenchFlagErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"malformed devices", []string{"--devices", "a-b"}, "--devices"},
		{"empty devices", []string{"--devices", ""}, "--devices"},
		{"zero size", []string{"--size", "0"}, "--size"},
		{"zero iters", []string{"--iters", "0"}, "--iters"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := benchcmd.NewCmdBench(newFactory(), func(ctx context.Context, o *benchcmd.Options) error {
				t.Errorf("%q: runF called", tt.args)
				return nil
			})
			cmd.SetArgs(tt.args)
			cmd.SilenceErrors, cmd.SilenceUsage = true, true
			cmd.SetFlagErrorFunc(cmdutil.FlagParseError) // the root's, which every command inherits
			err := cmd.ExecuteContext(context.Background())
			var fe *cmdutil.FlagError
			if !errors.As(err, &fe) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("%q: error %v, want a FlagError naming %s", tt.args, err, tt.want)
			}
		})
	}
}

// TestRunErrorsBeforeMeasuring checks the failures that happen before
// any probe starts: no process is run by these cases.
func TestRunErrorsBeforeMeasuring(t *testing.T) {
	example := func(context.Context) (*topology.Model, error) { return discover.Example() }
	tests := []struct {
		name     string
		edit     func(*benchcmd.Options)
		flagErr  bool
		contains string
	}{
		{
			name:     "device that does not exist",
			edit:     func(o *benchcmd.Options) { o.Devices = []int{1, 8} },
			flagErr:  true,
			contains: "--devices: device 8 does not exist (8 devices)",
		},
		{
			name: "discovery fails",
			edit: func(o *benchcmd.Options) {
				o.Topology = func(context.Context) (*topology.Model, error) { return nil, errors.New("no GPU found") }
			},
			contains: "no GPU found",
		},
		{
			name: "host NUMA nodes unreadable",
			edit: func(o *benchcmd.Options) {
				o.HostNUMA = func() ([]topology.NUMANode, error) { return nil, errors.New("no /sys/devices/system/node") }
			},
			contains: "bench: host NUMA nodes: no /sys/devices/system/node",
		},
		{
			name: "own binary not found",
			edit: func(o *benchcmd.Options) {
				o.Executable = func() (string, error) { return "", errors.New("readlink /proc/self/exe: no such file") }
			},
			contains: "readlink /proc/self/exe",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, out, _ := cmdtest.Streams()
			o := &benchcmd.Options{
				IO: ios, Topology: example, SizeMiB: 1, Iters: 1,
				Env:      func() []string { return nil },
				Getenv:   func(string) string { return "" },
				HostNUMA: func() ([]topology.NUMANode, error) { return []topology.NUMANode{{ID: 0, CPUs: []int{0}}}, nil },
				Executable: func() (string, error) {
					return "", errors.New("test must not get this far")
				},
			}
			tt.edit(o)
			err := benchcmd.Run(context.Background(), o)
			if err == nil || !strings.Contains(err.Error(), tt.contains) {
				t.Fatalf("error %v, want one containing %q", err, tt.contains)
			}
			var fe *cmdutil.FlagError
			if errors.As(err, &fe) != tt.flagErr {
				t.Errorf("error %v: FlagError %v, want %v", err, !tt.flagErr, tt.flagErr)
			}
			if out.Len() != 0 {
				t.Errorf("printed %q", out)
			}
		})
	}
}

// `bench --tool rocm_bandwidth_test` shows the measured figures row =
// from, column = to, and the topology's own figures in the
// "theoretical" column (it showed the measured ones there).
func TestRunToolTable(t *testing.T) {
	out := testutil.ReadFile(t, testutil.Public(t, "rocm-bandwidth-test-v2.5.1-radeon-vii-rx6900xt.txt"))
	model := func(context.Context) (*topology.Model, error) {
		m := &topology.Model{Source: "test", Devices: []topology.Device{
			{Index: 0, NUMANode: -1, PCIAddress: "0000:0d:00.0"}, {Index: 1, RuntimeIndex: 1, NUMANode: -1, PCIAddress: "0000:10:00.0"}}}
		return m, m.Finish()
	}
	ios, _, stdout, _ := cmdtest.Streams()
	cache := t.TempDir()
	o := &benchcmd.Options{
		IO: ios, Topology: model, SizeMiB: 1, Iters: 1, Tool: "rocm_bandwidth_test",
		Getenv: func(k string) string {
			if k == "XDG_CACHE_HOME" {
				return cache
			}
			return ""
		},
		MeasureTool: func(_ context.Context, m *topology.Model, _, host string, warn topology.Warner) (*bench.Result, error) {
			return bench.FromRBT(m, out, host, warn)
		},
	}
	if err := benchcmd.Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(stdout.String(), "\n")
	if !strings.HasPrefix(lines[0], "Device-to-device peak copy bandwidth, GB/s (row: from, column: to; rocm_bandwidth_test)") {
		t.Errorf("title %q", lines[0])
	}
	if got := strings.Fields(lines[2]); !reflect.DeepEqual(got, []string{"GPU0", "X", "47.1", "0-1", "32"}) {
		t.Errorf("GPU0 row %q, want 47.1 measured to GPU1 and the theoretical PHB 32", got)
	}
	if got := strings.Fields(lines[3]); !reflect.DeepEqual(got, []string{"GPU1", "81.6", "X"}) {
		t.Errorf("GPU1 row %q", got)
	}
}

// A pair without peer-to-peer access reads noP2P both ways, with the legend.
func TestRunToolTableNoP2P(t *testing.T) {
	ios, _, stdout, _ := cmdtest.Streams()
	o := &benchcmd.Options{
		IO: ios, Tool: "rocm_bandwidth_test", Getenv: func(string) string { return "" },
		Topology: func(context.Context) (*topology.Model, error) {
			m := &topology.Model{Source: "test", Devices: []topology.Device{{Index: 0, NUMANode: -1}, {Index: 1, RuntimeIndex: 1, NUMANode: -1}}}
			return m, m.Finish()
		},
		MeasureTool: func(_ context.Context, m *topology.Model, _, host string, _ topology.Warner) (*bench.Result, error) {
			return &bench.Result{Host: host, Keys: m.Keys(), Devices: []int{0, 1}, D2D: [][]float64{{0, 0}, {0, 0}}, NoP2P: [][2]int{{0, 1}}}, nil
		},
	}
	if err := benchcmd.Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(stdout.String(), "\n")
	if got := strings.Fields(lines[2]); len(got) < 3 || got[2] != "noP2P" {
		t.Errorf("GPU0 row %q, want noP2P to GPU1", got)
	}
	if got := strings.Fields(lines[3]); !reflect.DeepEqual(got, []string{"GPU1", "noP2P", "X"}) {
		t.Errorf("GPU1 row %q", got)
	}
	if !strings.Contains(stdout.String(), "\nnoP2P = no peer-to-peer access") {
		t.Errorf("no legend:\n%s", stdout)
	}
}

// A result that cannot be cached is said so once, and the table does not
// claim it was ("Cached in PATH" followed the warning before).
func TestRunNotCached(t *testing.T) {
	cache := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(cache, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	ios, _, stdout, stderr := cmdtest.Streams()
	o := &benchcmd.Options{
		IO: ios, Tool: "rocm_bandwidth_test",
		Getenv: func(k string) string { return map[string]string{"XDG_CACHE_HOME": cache}[k] },
		Topology: func(context.Context) (*topology.Model, error) {
			m := &topology.Model{Source: "test", Devices: []topology.Device{{Index: 0, NUMANode: -1}, {Index: 1, RuntimeIndex: 1, NUMANode: -1}}}
			return m, m.Finish()
		},
		MeasureTool: func(_ context.Context, m *topology.Model, _, host string, _ topology.Warner) (*bench.Result, error) {
			return &bench.Result{Host: host, Keys: m.Keys(), Devices: []int{0, 1}, D2D: [][]float64{{0, 5}, {5, 0}}}, nil
		},
	}
	if err := benchcmd.Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stderr.String(), "result not cached") || strings.Contains(stdout.String(), "Cached in") {
		t.Errorf("stdout %q\nstderr %q: want the warning and no \"Cached in\"", stdout, stderr)
	}
}
