package slurm

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/amdrun/amdrun/internal/topology"
)

// node is n devices numbered as the runtime numbers them.
func node(n int) []topology.Device {
	devs := make([]topology.Device, n)
	for i := range devs {
		devs[i] = topology.Device{Index: i, RuntimeIndex: i}
	}
	return devs
}

// without returns env without the entries of the named variables.
func without(env []string, names ...string) []string {
	var out []string
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(names, k) {
			out = append(out, kv)
		}
	}
	return out
}

// TestGrantRealSteps reads the grant of real step environments
// (testdata/slurm/env, see testdata/SOURCES.md) on the node views they
// were captured on, and on the view the issue-24 report describes: all
// of the node's GPUs visible, no device cgroup, no visible-device
// variable. Before the grant was read, every case chose among all the
// node's devices (8 ranks for a 1-GPU grant).
func TestGrantRealSteps(t *testing.T) {
	tests := []struct {
		name  string
		file  string
		extra []string // added to a published `env | grep GPU` excerpt
		drop  []string // variables removed (the user's, a container's)
		n     int      // devices the node shows
		want  []int
		err   string
	}{
		// Stanford Sherlock, 1 x H200 step, ConstrainDevices: the cgroup
		// shows the one GPU, Slurm's GPU 7, as device 0.
		{name: "sherlock cgroup view", file: "published-sherlock-h200-step-1gpu.env", n: 1, want: []int{0}},
		// The same step where the devices are not constrained and
		// CUDA_VISIBLE_DEVICES is gone: GPU 7 of 8, not all 8.
		{name: "sherlock all visible", file: "published-sherlock-h200-step-1gpu.env", drop: []string{"CUDA_VISIBLE_DEVICES"}, n: 8, want: []int{7}},
		{name: "sherlock all visible, fewer GPUs than Slurm's number", file: "published-sherlock-h200-step-1gpu.env", drop: []string{"CUDA_VISIBLE_DEVICES"}, n: 4,
			err: "slurm: GPU grant does not match this node's devices: SLURM_STEP_GPUS=7 names GPU 7, but this node shows 4 GPUs (runtime indices 0-3)"},
		// A 1-GPU step on an 8-GPU node without a device cgroup
		// (nvidia-smi lists 8): Slurm's GPU 5.
		{name: "charmander 1 of 8", file: "published-charmander-step-1of8gpus.env", extra: []string{"SLURM_STEP_ID=0", "SLURM_STEP_NODELIST=node-0"}, n: 8, want: []int{5}},
		// srun --gres=gpu:a100:4 and --gpus-per-node=a100:4: the
		// ordinals name the GPUs on a 4-GPU view and on an 8-GPU one.
		{name: "gres a100:4 on 4", file: "published-awsome-gres-a100x4-step.env", extra: []string{"SLURM_JOB_ID=1", "SLURM_STEP_ID=0", "SLURM_STEP_NODELIST=n1"}, n: 4, want: []int{0, 1, 2, 3}},
		{name: "gres a100:4 on 8", file: "published-awsome-gres-a100x4-step.env", extra: []string{"SLURM_JOB_ID=1", "SLURM_STEP_ID=0", "SLURM_STEP_NODELIST=n1"}, n: 8, want: []int{0, 1, 2, 3}},
		{name: "gpus-per-node a100:4 on 8", file: "published-awsome-gpus-per-node-a100x4-step.env", extra: []string{"SLURM_JOB_ID=1", "SLURM_STEP_ID=0", "SLURM_STEP_NODELIST=n1"}, n: 8, want: []int{0, 1, 2, 3}},
		// amdrun's own captures: task 1 of 2 per node got GPUs 2 and 3
		// of 4; a one-node step got all 4.
		{name: "gpus-per-task task 1", file: "step-gpus-per-task-2tasks-per-node-task1.env", drop: []string{"CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"}, n: 4, want: []int{2, 3}},
		{name: "gpus-per-task task 1, ordinal gone", file: "step-gpus-per-task-2tasks-per-node-task1.env", drop: []string{"GPU_DEVICE_ORDINAL"}, n: 4, want: []int{2, 3}},
		{name: "one-node step, 4 of 4", file: "step-1of2nodes-on-node2.env", n: 4, want: []int{0, 1, 2, 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := append(without(readEnv(t, tt.file), tt.drop...), tt.extra...)
			j, err := FromEnvWith(env, nil)
			if err != nil || j == nil {
				t.Fatalf("FromEnvWith = %v, %v", j, err)
			}
			if !j.Grant.Granted() {
				t.Fatalf("grant %+v: want GPUs granted", j.Grant)
			}
			got, err := j.Grant.Devices(node(tt.n), false, nil)
			if tt.err != "" {
				if err == nil || err.Error() != tt.err || !errors.Is(err, ErrGrant) {
					t.Fatalf("Devices = %v, %v; want error %q", got, err, tt.err)
				}
				return
			}
			if err != nil || !slices.Equal(got, tt.want) {
				t.Errorf("Devices on %d = %v, %v; want %v", tt.n, got, err, tt.want)
			}
		})
	}
}

// TestGrantDevices is the renumbering rule on made-up grants.
func TestGrantDevices(t *testing.T) {
	ids := func(v string) *Grant {
		g, err := readGrant(map[string]string{"SLURM_STEP_GPUS": v}, true)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	// Devices whose runtime numbers are not their indices (a source that
	// lists GPUs in another order than the runtime does).
	shuffled := []topology.Device{{Index: 0, RuntimeIndex: 2}, {Index: 1, RuntimeIndex: 0}, {Index: 2, RuntimeIndex: 1}, {Index: 3, RuntimeIndex: 3}}
	tests := []struct {
		name   string
		g      *Grant
		devs   []topology.Device
		masked bool
		want   []int
		warn   string
		err    string
	}{
		{name: "nothing granted", g: &Grant{}, devs: node(8)},
		{name: "nil grant", g: nil, devs: node(8)},
		{name: "slurm numbers when more are visible", g: ids("1,6"), devs: node(8), want: []int{1, 6}},
		{name: "cgroup renumbers to 0..k-1", g: ids("4,6"), devs: node(2), want: []int{0, 1}},
		{name: "written out of order", g: ids("6,1"), devs: node(8), want: []int{1, 6}},
		{name: "runtime numbers, not indices", g: ids("0,2"), devs: shuffled, want: []int{0, 1}},
		{name: "ordinals win", g: &Grant{IDs: []int{7}, IDsVar: "SLURM_STEP_GPUS=7", Ordinals: []int{0}, OrdinalsVar: "GPU_DEVICE_ORDINAL=0"}, devs: node(1), want: []int{0}},
		{name: "cgroup ordinals on a full view warn", g: &Grant{IDs: []int{7}, IDsVar: "SLURM_STEP_GPUS=7", Ordinals: []int{0}, OrdinalsVar: "GPU_DEVICE_ORDINAL=0"}, devs: node(8), want: []int{0},
			warn: "GPU_DEVICE_ORDINAL=0 renumbers SLURM_STEP_GPUS=7 (a device cgroup hides the node's other GPUs from the runtime), but the topology source shows all 8 GPUs"},
		{name: "ordinal outside the node", g: &Grant{Ordinals: []int{3}, OrdinalsVar: "GPU_DEVICE_ORDINAL=3"}, devs: node(2),
			err: "slurm: GPU grant does not match this node's devices: GPU_DEVICE_ORDINAL=3 names GPU 3, but this node shows 2 GPUs (runtime indices 0-1)"},
		{name: "more granted than shown", g: ids("0,1,2"), devs: node(2),
			err: "slurm: GPU grant does not match this node's devices: SLURM_STEP_GPUS=0,1,2 names GPU 2, but this node shows 2 GPUs (runtime indices 0-1)"},
		{name: "count of all", g: &Grant{Count: 4}, devs: node(4)},
		{name: "count under a visible list", g: &Grant{Count: 1}, devs: node(8), masked: true},
		{name: "count of fewer, unnamed", g: &Grant{Count: 1}, devs: node(8),
			err: "slurm: GPU grant does not match this node's devices: SLURM_GPUS_ON_NODE=1 says how many GPUs this task was granted but not which of the node's 8 (SLURM_STEP_GPUS, SLURM_JOB_GPUS and GPU_DEVICE_ORDINAL are unset): name them with CUDA_VISIBLE_DEVICES or --devices"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var warned []string
			warn := func(format string, args ...any) { warned = append(warned, fmt.Sprintf(format, args...)) }
			got, err := tt.g.Devices(tt.devs, tt.masked, warn)
			if tt.err != "" {
				if err == nil || err.Error() != tt.err || !errors.Is(err, ErrGrant) {
					t.Fatalf("Devices = %v, %v; want error %q", got, err, tt.err)
				}
				return
			}
			if err != nil || !slices.Equal(got, tt.want) {
				t.Errorf("Devices = %v, %v; want %v", got, err, tt.want)
			}
			switch {
			case tt.warn == "" && len(warned) > 0:
				t.Errorf("warned %q", warned)
			case tt.warn != "" && (len(warned) != 1 || !strings.HasPrefix(warned[0], tt.warn)):
				t.Errorf("warned %q; want one warning starting %q", warned, tt.warn)
			}
		})
	}
}

// TestReadGrant reads the variables: the step's list in a step, the
// job's outside, and refuses what is not a list of GPU numbers.
func TestReadGrant(t *testing.T) {
	vars := map[string]string{"SLURM_JOB_GPUS": "0,1,2,3", "SLURM_STEP_GPUS": "2,3", "GPU_DEVICE_ORDINAL": "2,3", "SLURM_GPUS_ON_NODE": "4"}
	g, err := readGrant(vars, true)
	if err != nil || !slices.Equal(g.IDs, []int{2, 3}) || g.IDsVar != "SLURM_STEP_GPUS=2,3" || !slices.Equal(g.Ordinals, []int{2, 3}) || g.Count != 4 {
		t.Errorf("in a step: %+v, %v; want SLURM_STEP_GPUS 2,3, ordinals 2,3, count 4", g, err)
	}
	if g, err := readGrant(vars, false); err != nil || !slices.Equal(g.IDs, []int{0, 1, 2, 3}) || g.IDsVar != "SLURM_JOB_GPUS=0,1,2,3" {
		t.Errorf("outside a step: %+v, %v; want SLURM_JOB_GPUS 0,1,2,3", g, err)
	}
	if g.String() != "SLURM_STEP_GPUS=2,3, GPU_DEVICE_ORDINAL=2,3" {
		t.Errorf("String() = %q", g.String())
	}
	if g, err := readGrant(map[string]string{"SLURM_JOB_GPUS": "0"}, true); err != nil || g.Granted() {
		t.Errorf("a job's list in a step: %+v, %v; want nothing granted (a step without gres inherits the batch script's variables)", g, err)
	}
	for v, want := range map[string]string{
		"0,x":         `slurm: SLURM_STEP_GPUS="0,x": want GPU indices such as 0,1: inconsistent slurm environment`,
		"0-3":         `slurm: SLURM_STEP_GPUS="0-3": want GPU indices such as 0,1: inconsistent slurm environment`,
		"1,1":         `slurm: SLURM_STEP_GPUS="1,1" names GPU 1 twice: inconsistent slurm environment`,
		" 1":          `slurm: SLURM_STEP_GPUS=" 1": want GPU indices such as 0,1: inconsistent slurm environment`,
		"0,":          `slurm: SLURM_STEP_GPUS="0,": want GPU indices such as 0,1: inconsistent slurm environment`,
		"99999999999": `slurm: SLURM_STEP_GPUS="99999999999": want GPU indices such as 0,1: inconsistent slurm environment`,
	} {
		_, err := readGrant(map[string]string{"SLURM_STEP_GPUS": v}, true)
		if err == nil || err.Error() != want || !errors.Is(err, ErrEnv) {
			t.Errorf("SLURM_STEP_GPUS=%q: %v; want %s", v, err, want)
		}
	}
}

// FuzzGrant varies the grant variables and the node's device count: no
// panic, errors of one line, and the devices returned are distinct,
// ascending indices of the node, granted ones when Slurm named them.
func FuzzGrant(f *testing.F) {
	f.Add("7", "", "1", 8)
	f.Add("7", "0", "1", 1)
	f.Add("2,3", "2,3", "4", 4)
	f.Add("0,1,2,3", "0,1,2,3", "4", 8)
	f.Add("5", "", "", 8)
	f.Add("", "", "1", 8)
	f.Add("1,1", "x", "-1", 0)
	f.Fuzz(func(t *testing.T, ids, ordinals, count string, n int) {
		n = min(max(n, 0), 64)
		vars := map[string]string{}
		for k, v := range map[string]string{"SLURM_STEP_GPUS": ids, "GPU_DEVICE_ORDINAL": ordinals, "SLURM_GPUS_ON_NODE": count} {
			if v != "" {
				vars[k] = v
			}
		}
		g, err := readGrant(vars, true)
		if err != nil {
			if strings.Contains(err.Error(), "\n") || !errors.Is(err, ErrEnv) {
				t.Fatalf("readGrant: %q", err)
			}
			return
		}
		got, err := g.Devices(node(n), false, func(string, ...any) {})
		if err != nil {
			if strings.Contains(err.Error(), "\n") || !errors.Is(err, ErrGrant) {
				t.Fatalf("Devices: %q", err)
			}
			return
		}
		if !slices.IsSorted(got) || len(slices.Compact(slices.Clone(got))) != len(got) {
			t.Fatalf("Devices = %v: want distinct ascending indices", got)
		}
		for _, i := range got {
			if i < 0 || i >= n {
				t.Fatalf("Devices = %v on %d devices", got, n)
			}
		}
		named := g.Ordinals
		if named == nil && len(g.IDs) != n {
			named = g.IDs
		}
		if named != nil && len(got) != len(named) {
			t.Fatalf("Devices = %v for %+v: want one device per named GPU", got, g)
		}
	})
}
