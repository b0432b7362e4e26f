package runcmd_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/user"
	"reflect"
	"strings"
	"testing"

	"github.com/amdrun/amdrun/cmd/amdrun/internal/cmdtest"
	"github.com/amdrun/amdrun/cmd/amdrun/internal/cmdutil"
	"github.com/amdrun/amdrun/cmd/amdrun/internal/runcmd"
	"github.com/amdrun/amdrun/internal/discover"
	"github.com/amdrun/amdrun/internal/lease"
	"github.com/amdrun/amdrun/internal/topology"
)

// exampleFactory is newFactory whose discovery returns the bundled MI250
// example after edit (which may be nil) changed it.
func exampleFactory(t *testing.T, edit func(*topology.Model), env ...string) (*cmdutil.Factory, *bytes.Buffer, *bytes.Buffer) {
	t.Helper()
	f := newFactory(t, env...)
	ios, _, out, errOut := cmdtest.Streams()
	f.IOStreams = ios
	f.Topo.Bandwidth = "theoretical" // never read a bench cache
	f.Discover = func(ctx context.Context, o discover.Options) (*topology.Model, error) {
		m, err := discover.Example()
		if err != nil {
			return nil, err
		}
		if edit != nil {
			edit(m)
		}
		return m, nil
	}
	return f, out, errOut
}

// dryRun runs the launch command for real (no runF) with the lease
// directory leaseDir.
func dryRun(t *testing.T, f *cmdutil.Factory, leaseDir string, args ...string) error {
	t.Helper()
	cmd := runcmd.NewCmdRun(f, nil)
	cmd.SetArgs(append([]string{"--lease-dir", leaseDir}, args...))
	cmd.SetOut(f.IOStreams.Out)
	cmd.SetErr(f.IOStreams.ErrOut)
	return cmd.ExecuteContext(context.Background())
}

// The header gives the chosen devices' NUMA nodes, not the count of the
// host's: here the GPUs sit on 4 nodes while this host lists 1 (it said
// "1 NUMA nodes").
func TestPlanHeaderNUMA(t *testing.T) {
	f, out, _ := exampleFactory(t, func(m *topology.Model) {
		for i := range m.Devices {
			m.Devices[i].NUMANode = i / 2
		}
		m.SetNUMANodes([]topology.NUMANode{{ID: 0, CPUs: []int{0, 1}}})
	})
	cmdtest.SetStdoutTTY(f.IOStreams, true)
	if err := dryRun(t, f, t.TempDir(), "--dry-run", "--explain", "-n", "8", "train.py"); err != nil {
		t.Fatal(err)
	}
	want := "Topology: example (seed MI250 node): 8 devices; chosen devices on 4 NUMA nodes (0-3)\n"
	if !strings.Contains(out.String(), want) {
		t.Errorf("output lacks %q:\n%s", want, out.String())
	}
}

// TestRunDryRunText: the text plan, on a terminal and on a pipe. The
// plan has no terminal branch (scripts read --json), so both must print
// the same bytes; a difference creeping in fails here.
func TestRunDryRunText(t *testing.T) {
	tests := []struct {
		name string
		env  []string
		args []string
		want []string
		// absent must not appear in the output.
		absent []string
	}{
		{
			name: "four devices",
			args: []string{"--dry-run", "-n", "4", "train.py", "--lr", "3e-4"},
			want: []string{
				"Topology: example (seed MI250 node): 8 devices; chosen devices on 2 NUMA nodes (0-1)\n",
				"Policy:   tree, score bottleneck 100000 MB/s",
				"Devices:  0,1,6,7\n",
				"CUDA_VISIBLE_DEVICES=0,1,6,7 HIP_VISIBLE_DEVICES=0,1,6,7",
				"(world size 4)",
				"RANK  LOCAL  DEVICE  NUMA  CPUS",
				"python3 -u train.py --lr 3e-4",
			},
			absent: []string{"naive"},
		},
		{
			name: "four devices for one process",
			args: []string{"--dry-run", "--ngpus", "4", "--nproc-per-node", "1", "--no-python", "vllm", "serve", "M", "--tensor-parallel-size", "4"},
			want: []string{
				"Devices:  0,1,6,7\n",
				"CUDA_VISIBLE_DEVICES=0,1,6,7 HIP_VISIBLE_DEVICES=0,1,6,7",
				"(world size 1)",
				"0     0      0,1,6,7  0,1   (not bound)  vllm serve M --tensor-parallel-size 4\n",
			},
			absent: []string{"\n1     1"},
		},
		{
			name: "four devices for two ranks: each sees its own pair, handed out in topology order",
			args: []string{"--dry-run", "--ngpus", "4", "--nproc_per_node", "2", "t.py"},
			want: []string{
				"Devices:  0,1,6,7\n",
				"Visible:  each rank its own devices (CUDA_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES): 0,1 | 6,7\n",
				"(world size 2)",
				"0     0      0,1     0     ",
				"1     1      6,7     1     ",
			},
		},
		{
			name:   "ngpus 0 with nproc: CPU ranks",
			args:   []string{"--dry-run", "--ngpus", "0", "--nproc-per-node", "3", "t.py"},
			want:   []string{"Topology: none: 3 CPU rank(s), no GPU\n", "(world size 3)", "2     2      cpu     -     (not bound)  python3 -u t.py"},
			absent: []string{"Visible", "Devices"},
		},
		{
			name: "explain compares with the naive pick",
			args: []string{"--dry-run", "--explain", "-n", "4", "train.py"},
			want: []string{
				"Why 0,1,6,7 (policy tree, bandwidth theoretical, exact search, 70 sets examined):",
				"naive (first free)  0,1,2,3  bottleneck 50000 MB/s",
				"bottleneck: chosen 100000 MB/s vs naive 50000 MB/s (2.00x)",
			},
		},
		{
			// (TestRunDryRunJSONGap shows a search --search-work cuts short)
			name:   "up to 16 candidates every set is scored whatever --search-work",
			args:   []string{"--dry-run", "--explain", "-n", "4", "--search-work", "10", "train.py"},
			want:   []string{"exact search, 70 sets examined"},
			absent: []string{"not proven"},
		},
		{
			name:   "explain says when the time cap cut the search short",
			args:   []string{"--dry-run", "--explain", "-n", "4", "--search-budget", "1ns", "train.py"},
			want:   []string{"best found within the --search-budget time cap (the answer depends on the machine's load), not proven: "},
			absent: []string{"exact search"},
		},
		{
			name: "environment mask restricts the choice",
			env:  []string{"CUDA_VISIBLE_DEVICES=4,5,6,7"},
			args: []string{"--dry-run", "-n", "2", "train.py"},
			want: []string{"Devices:  4,5\n", "CUDA_VISIBLE_DEVICES=4,5 HIP_VISIBLE_DEVICES=4,5"},
		},
		{
			name: "module and master port",
			args: []string{"--dry-run", "-n", "2", "--master-port", "29511", "-m", "pkg.train", "--epochs", "1"},
			want: []string{"Master:   127.0.0.1:29511 (world size 2)", "python3 -u -m pkg.train --epochs 1"},
		},
		{
			name:   "python from PYTHON_EXEC and no-python",
			env:    []string{"PYTHON_EXEC=/opt/py/bin/python"},
			args:   []string{"--dry-run", "-n", "1", "--no-python", "./a.out", "--flag"},
			want:   []string{"  ./a.out --flag\n"},
			absent: []string{"/opt/py/bin/python"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, out, _ := exampleFactory(t, nil, tt.env...)
			cmdtest.SetStdoutTTY(f.IOStreams, true)
			if err := dryRun(t, f, t.TempDir(), tt.args...); err != nil {
				t.Fatalf("%q: %v", tt.args, err)
			}
			piped, pipedOut, _ := exampleFactory(t, nil, tt.env...)
			cmdtest.SetStdoutTTY(piped.IOStreams, false)
			if err := dryRun(t, piped, t.TempDir(), tt.args...); err != nil {
				t.Fatalf("%q piped: %v", tt.args, err)
			}
			if !f.IOStreams.IsStdoutTTY() || piped.IOStreams.IsStdoutTTY() {
				t.Fatal("iostreams.Test did not take the terminal setting")
			}
			// The plan's MASTER_PORT is fixed by the flags or free: compare
			// without it where the flags leave it free.
			if a, b := withoutPort(out.String()), withoutPort(pipedOut.String()); a != b {
				t.Errorf("%q: a terminal gets\n%s\na pipe gets\n%s", tt.args, a, b)
			}
			for _, w := range tt.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("%q: output lacks %q:\n%s", tt.args, w, out)
				}
			}
			for _, a := range tt.absent {
				if strings.Contains(out.String(), a) {
					t.Errorf("%q: output has %q:\n%s", tt.args, a, out)
				}
			}
		})
	}
}

// jsonPlan is the part of `--dry-run --json` the tests read.
type jsonPlan struct {
	Source         string `json:"source"`
	Policy         string `json:"policy"`
	Devices        []int  `json:"devices"`
	VisibleDevices string `json:"visible_devices"`
	WorldSize      int    `json:"world_size"`
	Ranks          []struct {
		Rank      int               `json:"rank"`
		LocalRank int               `json:"local_rank"`
		Device    int               `json:"device"`
		NUMANode  int               `json:"numa_node"`
		CPUs      []int             `json:"cpus"`
		Argv      []string          `json:"argv"`
		Env       map[string]string `json:"env"`
	} `json:"ranks"`
	Naive *struct {
		Devices []int `json:"devices"`
	} `json:"naive"`
	Exact bool `json:"exact"`
	Gap   *struct {
		Term     string  `json:"term"`
		Bound    float64 `json:"bound"`
		Unit     string  `json:"unit"`
		Relative float64 `json:"relative"`
		CappedBy string  `json:"capped_by"`
	} `json:"gap"`
}

// --search-work and --search-budget reach the search; when one cuts the
// search short the JSON says so, names it and gives the proven gap; when
// the search ends, exact and no gap. Up to 16 candidates (the example's
// 8) every subset is scored whatever --search-work (issue 35): the work
// cap is shown on the KFD CPX tree's 63.
func TestRunDryRunJSONGap(t *testing.T) {
	for _, tc := range []struct {
		flag, budget string
		exact        bool
		cappedBy     string
		kfd          bool
	}{{"--search-work", "10", false, "work", true}, {"--search-work", "10", true, "", false},
		{"--search-budget", "1ns", false, "time", false}, {"--search-budget", "10s", true, "", false}} {
		f, out, _ := exampleFactory(t, nil)
		if tc.kfd {
			root := kfdRoot(t, "topo-mi300-cpx", "topology")
			f.Discover = func(ctx context.Context, o discover.Options) (*topology.Model, error) {
				return discover.Discover(ctx, discover.Options{Source: "sysfs", SysfsRoot: root})
			}
		}
		n := "4"
		if tc.kfd {
			n = "20"
		}
		err := dryRun(t, f, t.TempDir(), "--dry-run", "--json", "-n", n, tc.flag, tc.budget, "train.py")
		if err != nil {
			t.Fatal(err)
		}
		var p jsonPlan
		if err := json.Unmarshal(out.Bytes(), &p); err != nil {
			t.Fatalf("output is not JSON: %v\n%s", err, out)
		}
		if tc.cappedBy == "work" {
			// --explain says how far from proven the cut-short search is
			out.Reset()
			if err := dryRun(t, f, t.TempDir(), "--dry-run", "--explain", "-n", n, tc.flag, tc.budget, "train.py"); err != nil {
				t.Fatal(err)
			}
			if want := "best found within --search-work, not proven: total within "; !strings.Contains(out.String(), want) {
				t.Errorf("--explain lacks %q:\n%s", want, out)
			}
		}
		if p.Exact != tc.exact || (p.Gap == nil) != tc.exact {
			t.Fatalf("--search-budget %s: exact %v gap %+v", tc.budget, p.Exact, p.Gap)
		}
		// The gap lies on the first term the bound does not settle: the
		// total, or, where the total bound settles it (issue 25's bound
		// over the component at the bottleneck), a tie-break after it.
		units := map[string]string{"bottleneck": "MB/s", "total": "MB/s", "locality": "", "numa": "nodes", "busy": "devices", "split": "", "load": "%"}
		if g := p.Gap; g != nil {
			unit, ok := units[g.Term]
			if !ok || g.Unit != unit || g.Relative <= 0 || g.Relative > 1 || g.Bound <= 0 || g.CappedBy != tc.cappedBy {
				t.Errorf("--search-budget %s: gap %+v", tc.budget, *g)
			}
		}
	}
}

func TestRunDryRunJSON(t *testing.T) {
	f, out, _ := exampleFactory(t, nil, "CUDA_VISIBLE_DEVICES=4,5,6,7")
	cmdtest.SetStdoutTTY(f.IOStreams, true) // --json wins over a terminal
	err := dryRun(t, f, t.TempDir(), "--dry-run", "--json", "--policy", "ring", "--master-port", "29512", "-n", "2", "train.py", "--lr", "3e-4")
	if err != nil {
		t.Fatal(err)
	}
	var p jsonPlan
	if err := json.Unmarshal(out.Bytes(), &p); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out)
	}
	// Score terms where smaller is better are stored negated; a 0 must
	// not come out as -0.
	if strings.Contains(out.String(), ": -0,") || strings.Contains(out.String(), ": -0\n") {
		t.Errorf("JSON has -0:\n%s", out)
	}
	if p.Source != "example (seed MI250 node)" || p.Policy != "ring" {
		t.Errorf("source %q policy %q, want the example and ring", p.Source, p.Policy)
	}
	if !reflect.DeepEqual(p.Devices, []int{4, 5}) || p.VisibleDevices != "4,5" || p.WorldSize != 2 {
		t.Errorf("devices %v visible %q world %d, want [4 5] \"4,5\" 2", p.Devices, p.VisibleDevices, p.WorldSize)
	}
	if len(p.Ranks) != 2 {
		t.Fatalf("%d ranks, want 2:\n%s", len(p.Ranks), out)
	}
	for i, r := range p.Ranks {
		if r.Rank != i || r.LocalRank != i || r.Device != 4+i || r.NUMANode != 1 {
			t.Errorf("rank %d = rank %d local %d device %d numa %d, want %d %d %d 1", i, r.Rank, r.LocalRank, r.Device, r.NUMANode, i, i, 4+i)
		}
		if want := []string{"python3", "-u", "train.py", "--lr", "3e-4"}; !reflect.DeepEqual(r.Argv, want) {
			t.Errorf("rank %d argv %q, want %q", i, r.Argv, want)
		}
		if r.CPUs == nil {
			t.Errorf("rank %d cpus is null, want a list", i)
		}
		for k, v := range map[string]string{
			"CUDA_VISIBLE_DEVICES": "4,5", "RANK": fmt.Sprint(i), "LOCAL_RANK": fmt.Sprint(i),
			"WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29512",
		} {
			if r.Env[k] != v {
				t.Errorf("rank %d env %s=%q, want %q", i, k, r.Env[k], v)
			}
		}
	}
	if p.Naive == nil || !reflect.DeepEqual(p.Naive.Devices, []int{4, 5}) {
		t.Errorf("naive = %+v, want devices [4 5]", p.Naive)
	}
}

func TestRunDryRunErrors(t *testing.T) {
	busy := func(m *topology.Model) {
		m.Devices[2].Busy, m.Devices[2].BusyReason = true, "pid 4242 uses 10 GiB"
		m.Devices[5].Busy, m.Devices[5].BusyReason = true, "100% used"
	}
	tests := []struct {
		name string
		edit func(*topology.Model)
		env  []string
		args []string
		want []string
	}{
		{
			name: "not enough lists busy devices",
			edit: busy,
			args: []string{"--dry-run", "-n", "8", "t.py"},
			want: []string{"--ngpus 8: only 6 available", "free: 0,1,3,4,6,7", "busy: 2 (pid 4242 uses 10 GiB), 5 (100% used)", "--allow-busy"},
		},
		{
			name: "devices outside the environment mask",
			env:  []string{"CUDA_VISIBLE_DEVICES=4,5,6,7"},
			args: []string{"--dry-run", "--devices", "0-1", "-n", "1", "t.py"},
			want: []string{"--devices 0-1", "(4-7)"},
		},
		{
			name: "more than the mask leaves",
			env:  []string{"CUDA_VISIBLE_DEVICES=4,5,6,7"},
			args: []string{"--dry-run", "-n", "5", "t.py"},
			want: []string{"--ngpus 5: only 4 available"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, out, _ := exampleFactory(t, tt.edit, tt.env...)
			err := dryRun(t, f, t.TempDir(), tt.args...)
			if err == nil {
				t.Fatalf("%q: no error; output:\n%s", tt.args, out)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q: error %q lacks %q", tt.args, err, w)
				}
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("%q: error is not one line: %q", tt.args, err)
			}
		})
	}
}

func TestRunDryRunLeases(t *testing.T) {
	dir := t.TempDir()
	leases, err := lease.Open(dir, lease.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer leases.Close()
	held, err := leases.Acquire([]string{"gpu0", "gpu1"})
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release()

	// The best pair of the example is 0,1; another job holds it.
	f, out, _ := exampleFactory(t, nil)
	if err := dryRun(t, f, dir, "--dry-run", "-n", "2", "t.py"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "Devices:  2,3\n") {
		t.Errorf("with 0,1 leased, want devices 2,3:\n%s", out)
	}

	f, _, _ = exampleFactory(t, nil)
	err = dryRun(t, f, dir, "--dry-run", "-n", "8", "t.py")
	me, _ := user.Current()
	want := fmt.Sprintf("held: 0-1 (leased by pid %d (%s: ", os.Getpid(), me.Username)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("-n 8 with 0,1 leased: error %v, want one containing %q", err, want)
	}

	// --no-lease ignores other jobs' leases.
	f, out, _ = exampleFactory(t, nil)
	if err := dryRun(t, f, dir, "--dry-run", "--no-lease", "-n", "2", "t.py"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "Devices:  0,1\n") {
		t.Errorf("--no-lease: want devices 0,1:\n%s", out)
	}
}

func TestRunNoGPU(t *testing.T) {
	noGPU := func(ctx context.Context, o discover.Options) (*topology.Model, error) {
		return nil, fmt.Errorf("sysfs: nothing: %w", discover.ErrNoGPU)
	}
	// The source left to auto on a machine without GPUs: CPU ranks, as
	// torchrun would run, and one line saying why where GPUs were asked
	// for; a count of ranks runs quietly (issue 31).
	for _, tc := range []struct {
		args  []string
		ranks int
		quiet bool
	}{
		{[]string{"-n", "2", "t.py"}, 2, false},
		{[]string{"--nproc-per-node", "3", "t.py"}, 3, true},
		{[]string{"--nproc-per-node", "auto", "t.py"}, 5, true}, // one per CPU (NumCPU below)
		{[]string{"t.py"}, 1, false},                            // torchrun's default
	} {
		f, out, _ := exampleFactory(t, nil)
		f.Discover = noGPU
		var warnings []string
		f.Warn = func(format string, args ...any) { warnings = append(warnings, fmt.Sprintf(format, args...)) }
		cmd := runcmd.NewCmdRun(f, func(ctx context.Context, o *runcmd.Options) error {
			o.NumCPU = func() int { return 5 }
			return runcmd.Run(ctx, o)
		})
		cmd.SetArgs(append([]string{"--lease-dir", t.TempDir(), "--dry-run", "--json"}, tc.args...))
		if err := cmd.ExecuteContext(context.Background()); err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		var p struct {
			CPU     bool  `json:"cpu"`
			Devices []int `json:"devices"`
			Ranks   []struct {
				Device  int               `json:"device"`
				Devices []int             `json:"devices"`
				Env     map[string]string `json:"env"`
			} `json:"ranks"`
		}
		if err := json.Unmarshal(out.Bytes(), &p); err != nil {
			t.Fatalf("%q: %v\n%s", tc.args, err, out)
		}
		if !p.CPU || len(p.Devices) != 0 || len(p.Ranks) != tc.ranks {
			t.Errorf("%q: cpu %v, devices %v, %d ranks; want %d CPU ranks", tc.args, p.CPU, p.Devices, len(p.Ranks), tc.ranks)
		}
		for i, r := range p.Ranks {
			if r.Device != -1 || len(r.Devices) != 0 || r.Env["RANK"] != fmt.Sprint(i) || r.Env["WORLD_SIZE"] != fmt.Sprint(tc.ranks) {
				t.Errorf("%q: rank %d: device %d %v, env %v", tc.args, i, r.Device, r.Devices, r.Env)
			}
			if _, ok := r.Env["CUDA_VISIBLE_DEVICES"]; ok {
				t.Errorf("%q: rank %d: CUDA_VISIBLE_DEVICES set for a CPU rank", tc.args, i)
			}
		}
		if tc.quiet != (len(warnings) == 0) || !tc.quiet && !strings.Contains(warnings[0], "no GPU found") {
			t.Errorf("%q: warnings %q, want one saying no GPU was found: %v", tc.args, warnings, !tc.quiet)
		}
	}

	// Not when the user asked for GPUs: a named source, --nproc-per-node
	// gpu, or --devices.
	for _, args := range [][]string{
		{"--nproc-per-node", "gpu", "t.py"},
		{"--devices", "0,1", "t.py"},
	} {
		f, _, _ := exampleFactory(t, nil)
		f.Discover = noGPU
		if err := dryRun(t, f, t.TempDir(), append([]string{"--dry-run"}, args...)...); !errors.Is(err, discover.ErrNoGPU) {
			t.Errorf("%q: error %v, want ErrNoGPU", args, err)
		}
	}
	f, _, _ := exampleFactory(t, nil)
	f.Discover = noGPU
	f.Topo.Source = "sysfs"
	if err := dryRun(t, f, t.TempDir(), "--dry-run", "-n", "2", "t.py"); !errors.Is(err, discover.ErrNoGPU) {
		t.Errorf("--source sysfs: error %v, want ErrNoGPU", err)
	}
}

// withoutPort blanks the port of a plan's "Master:" line.
func withoutPort(plan string) string {
	lines := strings.Split(plan, "\n")
	for i, l := range lines {
		if rest, ok := strings.CutPrefix(l, "Master:   "); ok {
			if host, after, ok := strings.Cut(rest, " "); ok {
				if j := strings.LastIndex(host, ":"); j >= 0 {
					lines[i] = "Master:   " + host[:j] + ":PORT " + after
				}
			}
		}
	}
	return strings.Join(lines, "\n")
}
