package runcmd_test

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/amdrun/amdrun/cmd/amdrun/internal/cmdtest"
	"github.com/amdrun/amdrun/cmd/amdrun/internal/cmdutil"
	"github.com/amdrun/amdrun/cmd/amdrun/internal/runcmd"
	"github.com/amdrun/amdrun/internal/discover"
	"github.com/amdrun/amdrun/internal/launch"
	"github.com/amdrun/amdrun/internal/launch/numabalance"
	"github.com/amdrun/amdrun/internal/plan"
	"github.com/amdrun/amdrun/internal/selector"
	"github.com/amdrun/amdrun/internal/topology"
)

// errNoTool is what the fake Runner answers to every program, so that
// Slurm node lists are expanded by ParseHostlist, never by scontrol.
var errNoTool = errors.New("fake runner: no programs in tests")

// newFactory returns a Factory built by hand: test streams, the given
// environment, a Runner that fails, discovery that must not happen
// (flag tests) and one host NUMA node.
func newFactory(t *testing.T, env ...string) *cmdutil.Factory {
	t.Helper()
	ios, _, _, _ := cmdtest.Streams()
	return &cmdutil.Factory{
		IOStreams: ios,
		Version:   "test",
		Env:       func() []string { return env },
		Run: func(ctx context.Context, name string, args ...string) ([]byte, error) {
			return nil, errNoTool
		},
		Discover: func(ctx context.Context, o discover.Options) (*topology.Model, error) {
			t.Error("flag parsing must not discover the topology")
			return nil, errors.New("no discovery in flag tests")
		},
		HostNUMA: func() ([]topology.NUMANode, error) {
			return []topology.NUMANode{{ID: 0, CPUs: []int{0, 1}}}, nil
		},
		Warn:       func(format string, args ...any) { t.Logf("warning: "+format, args...) },
		Executable: func() (string, error) { return "/fake/amdrun", nil },
	}
}

// parsed is the part of Options that flags decide, in comparable form.
type parsed struct {
	NGPUs         int
	Devices       []int
	Exclude       []int
	Policy        string
	Order         selector.Order
	SearchBudget  time.Duration
	SearchWork    int
	Module        bool
	NoPython      bool
	Bind          plan.BindMode
	Mem           plan.MemPolicy
	Wait          time.Duration
	NUMABalancing numabalance.Mode
	Contain       launch.Containment
	NNodes        int
	NodeRank      int
	MasterAddr    string
	MasterPort    int
	DryRun        bool
	Args          []string
}

func view(o *runcmd.Options) parsed {
	p := parsed{
		NGPUs: o.Ranks.GPUs, Devices: o.Devices, Exclude: o.Exclude, Order: o.Order, SearchBudget: o.SearchBudget, SearchWork: o.SearchWork,
		Module: o.Module, NoPython: o.NoPython, Bind: o.Bind, Mem: o.Mem, Wait: o.Wait,
		NUMABalancing: o.NUMABalancing, Contain: o.Contain, NNodes: o.NNodes, NodeRank: o.NodeRank,
		MasterAddr: o.MasterAddr, MasterPort: o.MasterPort, DryRun: o.DryRun, Args: o.Args,
	}
	p.Policy = o.Policy.String()
	if len(p.Args) == 0 {
		p.Args = nil // cobra passes an empty slice
	}
	return p
}

// defaults are the parsed values of `amdrun SCRIPT` with no flags.
func defaults(args ...string) parsed {
	return parsed{
		Policy: "tree", Order: selector.OrderIndex, SearchBudget: selector.DefaultBudget, SearchWork: selector.DefaultWork, Mem: plan.MemBind,
		NUMABalancing: numabalance.Keep, NNodes: 1, MasterAddr: "127.0.0.1", Args: args,
	}
}

func with(p parsed, edit func(*parsed)) parsed {
	edit(&p)
	return p
}

// parse runs NewCmdRun on args with a runF that captures the Options.
func parse(t *testing.T, f *cmdutil.Factory, args ...string) (*runcmd.Options, error) {
	t.Helper()
	var got *runcmd.Options
	cmd := runcmd.NewCmdRun(f, func(ctx context.Context, o *runcmd.Options) error {
		got = o
		return nil
	})
	cmd.SetArgs(args)
	cmd.SetOut(f.IOStreams.Out)
	cmd.SetErr(f.IOStreams.ErrOut)
	err := cmd.ExecuteContext(context.Background())
	if err == nil && got == nil {
		t.Fatalf("runF was not called for %q", args)
	}
	return got, err
}

func TestNewCmdRunFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want parsed
	}{
		{
			name: "ngpus and script args",
			args: []string{"--ngpus", "4", "train.py", "--lr", "3e-4"},
			want: with(defaults("train.py", "--lr", "3e-4"), func(p *parsed) { p.NGPUs = 4 }),
		},
		{
			name: "flags after SCRIPT belong to the script",
			args: []string{"train.py", "--ngpus", "9"},
			want: defaults("train.py", "--ngpus", "9"),
		},
		{
			name: "short ngpus and module",
			args: []string{"-n", "2", "-m", "pkg.mod", "x"},
			want: with(defaults("pkg.mod", "x"), func(p *parsed) { p.NGPUs, p.Module = 2, true }),
		},
		{
			name: "no python",
			args: []string{"--no-python", "./a.out"},
			want: with(defaults("./a.out"), func(p *parsed) { p.NoPython = true }),
		},
		{
			name: "devices list with a range",
			args: []string{"--devices", "0,2,4-7", "t.py"},
			want: with(defaults("t.py"), func(p *parsed) { p.Devices = []int{0, 2, 4, 5, 6, 7} }),
		},
		{
			name: "exclude",
			args: []string{"--exclude", "3", "t.py"},
			want: with(defaults("t.py"), func(p *parsed) { p.Exclude = []int{3} }),
		},
		{
			name: "ring policy",
			args: []string{"--policy", "ring", "t.py"},
			want: with(defaults("t.py"), func(p *parsed) { p.Policy = "ring" }),
		},
		{
			name: "search budget",
			args: []string{"--search-budget", "50ms", "t.py"},
			want: with(defaults("t.py"), func(p *parsed) { p.SearchBudget = 50 * time.Millisecond }),
		},
		{
			name: "search work",
			args: []string{"--search-work", "500", "t.py"},
			want: with(defaults("t.py"), func(p *parsed) { p.SearchWork = 500 }),
		},
		{
			name: "links order",
			args: []string{"--order", "links", "t.py"},
			want: with(defaults("t.py"), func(p *parsed) { p.Order = selector.OrderLinks }),
		},
		{
			name: "exclusive binding",
			args: []string{"--bind", "exclusive", "t.py"},
			want: with(defaults("t.py"), func(p *parsed) { p.Bind = plan.BindExclusive }),
		},
		{
			name: "preferred memory policy",
			args: []string{"--mem-policy", "preferred", "t.py"},
			want: with(defaults("t.py"), func(p *parsed) { p.Mem = plan.MemPreferred }),
		},
		{
			name: "wait forever",
			args: []string{"--wait", "t.py"},
			want: with(defaults("t.py"), func(p *parsed) { p.Wait = -1 }),
		},
		{
			name: "wait at most 30s",
			args: []string{"--wait=30s", "t.py"},
			want: with(defaults("t.py"), func(p *parsed) { p.Wait = 30 * time.Second }),
		},
		{
			name: "numa balancing off",
			args: []string{"--numa-balancing", "off", "t.py"},
			want: with(defaults("t.py"), func(p *parsed) { p.NUMABalancing = numabalance.Off }),
		},
		{
			name: "multi-node",
			args: []string{"--nnodes", "2", "--node-rank", "1", "--master-addr", "node0", "--master-port", "29500", "--ngpus", "8", "t.py"},
			want: with(defaults("t.py"), func(p *parsed) {
				p.NNodes, p.NodeRank, p.MasterAddr, p.MasterPort, p.NGPUs = 2, 1, "node0", 29500, 8
			}),
		},
		{
			name: "contain in a subreaper only",
			args: []string{"--contain", "subreaper", "t.py"},
			want: with(defaults("t.py"), func(p *parsed) { p.Contain = launch.ContainSubreaper }),
		},
		{
			name: "dry run needs no script",
			args: []string{"--dry-run", "-n", "2"},
			want: with(defaults(), func(p *parsed) { p.DryRun, p.NGPUs = true, 2 }),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFactory(t)
			o, err := parse(t, f, tt.args...)
			if err != nil {
				t.Fatalf("%q: %v", tt.args, err)
			}
			if got := view(o); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("%q:\n got %+v\nwant %+v", tt.args, got, tt.want)
			}
			if o.Slurm != nil {
				t.Errorf("Slurm = %+v outside an allocation, want nil", o.Slurm)
			}
		})
	}
}

func TestNewCmdRunFlagErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		// want are substrings of the error; the first names the flag.
		want []string
	}{
		{"unknown policy", []string{"--policy", "best", "t.py"}, []string{"--policy", `"best"`, "tree or ring"}},
		{"negative ngpus", []string{"--ngpus", "-1", "t.py"}, []string{"--ngpus", "got -1"}},
		{"malformed devices", []string{"--devices", "0,x", "t.py"}, []string{"--devices", `"0,x"`}},
		{"reversed devices range", []string{"--devices", "5-2", "t.py"}, []string{"--devices", `"5-2"`}},
		{"empty devices", []string{"--devices", "", "t.py"}, []string{"--devices", "empty"}},
		{"malformed exclude", []string{"--exclude", "a", "t.py"}, []string{"--exclude", `"a"`}},
		{"node rank not below nnodes", []string{"--nnodes", "2", "--node-rank", "2", "--master-port", "29500", "-n", "1", "t.py"}, []string{"--node-rank", "0..1", "got 2"}},
		{"nnodes without ngpus", []string{"--nnodes", "2", "--master-addr", "node0", "--master-port", "29500", "t.py"}, []string{"--ngpus", "--nnodes 2"}},
		{"module with no-python", []string{"-m", "--no-python", "x"}, []string{"--no-python", "--module"}},
		{"json without dry-run", []string{"--json", "t.py"}, []string{"--json", "--dry-run"}},
		{"missing script", []string{"-n", "2"}, []string{"SCRIPT"}},
		{"bad wait", []string{"--wait=soon", "t.py"}, []string{"--wait", `"soon"`}},
		{"wait duration without =", []string{"--wait", "30s", "t.py"}, []string{"--wait", "--wait=30s"}},
		{"zero wait", []string{"--wait=0s", "t.py"}, []string{"--wait", `"0s"`}},
		{"bad numa balancing", []string{"--numa-balancing", "maybe", "t.py"}, []string{"--numa-balancing", `"maybe"`}},
		{"bad bind", []string{"--bind", "ccd", "t.py"}, []string{"--bind", `"ccd"`}},
		{"bad mem policy", []string{"--mem-policy", "interleave", "t.py"}, []string{"--mem-policy", `"interleave"`}},
		{"bad contain", []string{"--contain", "cgroup", "t.py"}, []string{"--contain", `"cgroup"`, "auto, pid-namespace, user-namespace or subreaper"}},
		{"bad order", []string{"--order", "random", "t.py"}, []string{"--order", `"random"`}},
		{"nproc past the node's bound", []string{"--ngpus", "0", "--nproc-per-node", "1000000", "t.py"}, []string{"--nproc-per-node 1000000", "more ranks than this node can run: at most ", "per CPU"}},
		{"zero search budget", []string{"--search-budget", "0s", "t.py"}, []string{"--search-budget", "positive", "0s"}},
		{"negative search budget", []string{"--search-budget", "-1s", "t.py"}, []string{"--search-budget", "-1s"}},
		{"zero search work", []string{"--search-work", "0", "t.py"}, []string{"--search-work", "positive", "0"}},
		{"bad ranks filter", []string{"--local-ranks-filter", "x", "t.py"}, []string{"--local-ranks-filter"}},
		{"negative grace", []string{"--grace", "-1s", "t.py"}, []string{"--grace"}},
		{"grace without a unit", []string{"--grace", "5", "t.py"}, []string{"--grace 5: add a unit, e.g. 5s or 5m"}},
		{"wait without a unit", []string{"--wait=30", "t.py"}, []string{"--wait 30: add a unit"}},
		{"negative max restarts", []string{"--max-restarts", "-1", "t.py"}, []string{"--max-restarts"}},
		{"master port out of range", []string{"--master-port", "70000", "t.py"}, []string{"--master-port", "70000"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFactory(t)
			_, err := parse(t, f, tt.args...)
			if err == nil {
				t.Fatalf("%q: no error, want one naming %s", tt.args, tt.want[0])
			}
			var fe *cmdutil.FlagError
			if !errors.As(err, &fe) {
				t.Errorf("%q: error %v (%T) is not a *cmdutil.FlagError", tt.args, err, err)
			}
			msg := err.Error()
			if strings.Contains(msg, "\n") {
				t.Errorf("%q: error is not one line: %q", tt.args, msg)
			}
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("%q: error %q does not contain %q", tt.args, msg, w)
				}
			}
		})
	}
}

// slurmEnv is node 1's view of the step "srun --ntasks-per-node=1" of a
// two-node Slurm job.
var slurmEnv = []string{
	"SLURM_JOB_ID=77", "SLURM_JOB_NUM_NODES=2", "SLURM_NODEID=1", "SLURM_JOB_NODELIST=gpu[01-02]",
	"SLURM_STEP_ID=0", "SLURM_STEP_NODELIST=gpu[01-02]", "SLURM_STEP_NUM_NODES=2", "SLURM_STEP_NUM_TASKS=2",
}

// batchEnv is the batch script of that job: Slurm sets SLURM_NODEID=0
// there too, but no step.
var batchEnv = []string{
	"SLURM_JOB_ID=77", "SLURM_JOB_NUM_NODES=2", "SLURM_NODEID=0", "SLURM_JOB_NODELIST=gpu[01-02]",
}

func TestNewCmdRunSlurm(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  []string // added to slurmEnv
		want parsed
	}{
		{
			name: "allocation fills the multi-node flags",
			args: []string{"-n", "4", "t.py"},
			want: with(defaults("t.py"), func(p *parsed) {
				p.NGPUs, p.NNodes, p.NodeRank, p.MasterAddr, p.MasterPort = 4, 2, 1, "gpu01", 20077
			}),
		},
		{
			name: "explicit master port wins",
			args: []string{"-n", "4", "--master-port", "1234", "t.py"},
			want: with(defaults("t.py"), func(p *parsed) {
				p.NGPUs, p.NNodes, p.NodeRank, p.MasterAddr, p.MasterPort = 4, 2, 1, "gpu01", 1234
			}),
		},
		{
			name: "explicit --nnodes 1 runs this node's own job",
			args: []string{"-n", "4", "--nnodes", "1", "t.py"},
			want: with(defaults("t.py"), func(p *parsed) {
				p.NGPUs = 4
			}),
		},
		{
			name: "GPUs per node from Slurm when --ngpus is not given",
			args: []string{"t.py"},
			env:  []string{"SLURM_GPUS_PER_NODE=gfx90a:2", "SLURM_STEP_GPUS=4,5", "ROCR_VISIBLE_DEVICES=4,5"},
			want: with(defaults("t.py"), func(p *parsed) {
				p.NGPUs, p.NNodes, p.NodeRank, p.MasterAddr, p.MasterPort = 2, 2, 1, "gpu01", 20077
			}),
		},
		{
			name: "explicit --ngpus wins over Slurm's GPUs per task",
			args: []string{"-n", "1", "t.py"},
			env:  []string{"SLURM_GPUS_PER_TASK=2", "SLURM_STEP_GPUS=0,1"},
			want: with(defaults("t.py"), func(p *parsed) {
				p.NGPUs, p.NNodes, p.NodeRank, p.MasterAddr, p.MasterPort = 1, 2, 1, "gpu01", 20077
			}),
		},
		{
			name: "a one-node step of a two-node job",
			args: []string{"-n", "4", "t.py"},
			env:  []string{"SLURM_STEP_NODELIST=gpu02", "SLURM_STEP_NUM_NODES=1", "SLURM_NODEID=0", "SLURM_STEP_NUM_TASKS=1"},
			want: with(defaults("t.py"), func(p *parsed) {
				p.NGPUs = 4
			}),
		},
		{
			name: "explicit master addr wins",
			args: []string{"-n", "4", "--master-addr", "10.0.0.1", "t.py"},
			want: with(defaults("t.py"), func(p *parsed) {
				p.NGPUs, p.NNodes, p.NodeRank, p.MasterAddr, p.MasterPort = 4, 2, 1, "10.0.0.1", 20077
			}),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFactory(t, append(slices.Clone(slurmEnv), tt.env...)...)
			o, err := parse(t, f, tt.args...)
			if err != nil {
				t.Fatalf("%q: %v", tt.args, err)
			}
			if got := view(o); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("%q:\n got %+v\nwant %+v", tt.args, got, tt.want)
			}
			if o.Slurm == nil || o.Slurm.JobID != "77" {
				t.Errorf("Slurm = %+v, want job 77", o.Slurm)
			}
		})
	}
}

// TestNewCmdRunSlurmOneNode: a one-node allocation gets a free local port
// (0 here: chosen at launch), not the job's fixed port, so two jobs of
// one allocation on one node do not collide.
func TestNewCmdRunSlurmOneNode(t *testing.T) {
	f := newFactory(t, "SLURM_JOB_ID=5", "SLURM_JOB_NUM_NODES=1", "SLURM_NODEID=0", "SLURM_JOB_NODELIST=n1")
	o, err := parse(t, f, "-n", "2", "t.py")
	if err != nil {
		t.Fatal(err)
	}
	if o.NNodes != 1 || o.MasterAddr != "127.0.0.1" || o.MasterPort != 0 {
		t.Errorf("one-node Slurm job: nnodes %d master %s:%d, want 1 and 127.0.0.1 with a free port", o.NNodes, o.MasterAddr, o.MasterPort)
	}
}

// TestNewCmdRunSlurmOwnShape: --nnodes 1 in the batch script of a
// two-node job runs a job of this node alone; Slurm's shape does not apply.
func TestNewCmdRunSlurmOwnShape(t *testing.T) {
	f := newFactory(t, batchEnv...)
	o, err := parse(t, f, "-n", "2", "--nnodes", "1", "t.py")
	if err != nil {
		t.Fatal(err)
	}
	if o.NNodes != 1 || o.NodeRank != 0 || o.MasterAddr != "127.0.0.1" {
		t.Errorf("nnodes %d rank %d master %s, want 1, 0, 127.0.0.1", o.NNodes, o.NodeRank, o.MasterAddr)
	}
}

func TestNewCmdRunSlurmErrors(t *testing.T) {
	tests := []struct {
		name string
		env  []string
		args []string
		want []string
	}{
		{
			name: "two-node job without ngpus",
			env:  slurmEnv,
			args: []string{"t.py"},
			want: []string{"--ngpus", "--nnodes 2"},
		},
		{
			name: "amdrun in the batch script of a two-node job",
			env:  batchEnv,
			args: []string{"-n", "2", "t.py"},
			want: []string{"outside a job step of a 2-node job", "srun --ntasks-per-node=1"},
		},
		{
			name: "two tasks per node",
			env: append(slices.Clone(slurmEnv), "SLURM_STEP_NUM_TASKS=4", "SLURM_STEP_TASKS_PER_NODE=2(x2)",
				"SLURMD_TRES_BIND=gpu:per_task:1", "SLURM_STEP_GPUS=1", "ROCR_VISIBLE_DEVICES=1"),
			args: []string{"t.py"},
			want: []string{"4 tasks on 2 nodes", "SLURM_STEP_TASKS_PER_NODE=2(x2)", "one task per node"},
		},
		{
			name: "a step across the components of a heterogeneous job",
			env: append(slices.Clone(slurmEnv), "SLURM_HET_SIZE=2",
				"SLURM_JOB_NODELIST_HET_GROUP_0=gpu01", "SLURM_JOB_NODELIST_HET_GROUP_1=gpu02"),
			args: []string{"-n", "2", "t.py"},
			want: []string{"heterogeneous job (SLURM_HET_SIZE=2", "--het-group"},
		},
		{
			name: "node id outside the job",
			env:  []string{"SLURM_JOB_ID=77", "SLURM_JOB_NODELIST=gpu[01-02]", "SLURM_NODEID=5"},
			args: []string{"-n", "1", "t.py"},
			want: []string{"SLURM_NODEID=5"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFactory(t, tt.env...)
			_, err := parse(t, f, tt.args...)
			if err == nil {
				t.Fatalf("%q: no error", tt.args)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q: error %q does not contain %q", tt.args, err, w)
				}
			}
		})
	}
}
