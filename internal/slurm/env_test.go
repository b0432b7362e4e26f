package slurm

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestFromEnv(t *testing.T) {
	tests := []struct {
		name string
		env  []string
		want *Job
	}{
		{
			name: "outside slurm",
			env:  []string{"HOME=/root", "SLURM_NODEID=3"},
			want: nil,
		},
		{
			name: "empty job id is outside slurm",
			env:  []string{"SLURM_JOB_ID="},
			want: nil,
		},
		{
			name: "two nodes, second node",
			env: []string{
				"SLURM_JOB_ID=4242", "SLURM_JOB_NUM_NODES=2", "SLURM_NODEID=1",
				"SLURM_JOB_NODELIST=gpu[07-08]", "SLURM_GPUS_ON_NODE=8", "SLURM_NTASKS_PER_NODE=1",
			},
			want: &Job{
				JobID: "4242", NNodes: 2, NodeRank: 1, Hosts: []string{"gpu07", "gpu08"},
				MasterAddr: "gpu07", MasterPort: 24242, GPUsOnNode: 8, nodeIDSet: true,
			},
		},
		{
			name: "old variable names",
			env:  []string{"SLURM_JOB_ID=123456", "SLURM_NNODES=3", "SLURM_NODEID=0", "SLURM_NODELIST=a,b[1-2]"},
			want: &Job{
				JobID: "123456", NNodes: 3, NodeRank: 0, Hosts: []string{"a", "b1", "b2"},
				MasterAddr: "a", MasterPort: 20000 + 123456%20000, nodeIDSet: true,
			},
		},
		{
			name: "one node, no node id, no node count",
			env:  []string{"SLURM_JOB_ID=20000", "SLURM_JOB_NODELIST=login1"},
			want: &Job{JobID: "20000", NNodes: 1, Hosts: []string{"login1"}, MasterAddr: "login1", MasterPort: 20000},
		},
		{
			name: "port wraps below 40000",
			env:  []string{"SLURM_JOB_ID=39999", "SLURM_JOB_NODELIST=n1"},
			want: &Job{JobID: "39999", NNodes: 1, Hosts: []string{"n1"}, MasterAddr: "n1", MasterPort: 39999},
		},
		{
			name: "later entry wins",
			env:  []string{"SLURM_JOB_ID=1", "SLURM_JOB_NODELIST=old", "SLURM_JOB_NODELIST=new"},
			want: &Job{JobID: "1", NNodes: 1, Hosts: []string{"new"}, MasterAddr: "new", MasterPort: 20001},
		},
		{
			name: "job list wins over step-era name",
			env:  []string{"SLURM_JOB_ID=7", "SLURM_NODELIST=x", "SLURM_JOB_NODELIST=y"},
			want: &Job{JobID: "7", NNodes: 1, Hosts: []string{"y"}, MasterAddr: "y", MasterPort: 20007},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := FromEnvWith(tt.env, nil)
			if err != nil {
				t.Fatalf("FromEnv: %v", err)
			}
			if tt.want != nil {
				tt.want.Grant = &Grant{Count: tt.want.GPUsOnNode}
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("FromEnv =\n %+v\nwant\n %+v", got, tt.want)
			}
		})
	}
}

func TestFromEnvErrors(t *testing.T) {
	base := []string{"SLURM_JOB_ID=99", "SLURM_JOB_NODELIST=n[1-2]", "SLURM_JOB_NUM_NODES=2", "SLURM_NODEID=0"}
	tests := []struct {
		name string
		env  []string
		want string
	}{
		{"job id not a number", []string{"SLURM_JOB_ID=abc", "SLURM_JOB_NODELIST=n1"},
			`slurm: SLURM_JOB_ID="abc" is not a non-negative number: inconsistent slurm environment`},
		{"no node list", []string{"SLURM_JOB_ID=99"},
			`slurm: SLURM_JOB_ID=99 is set but SLURM_JOB_NODELIST and SLURM_NODELIST are not: inconsistent slurm environment`},
		{"no node list in a step", []string{"SLURM_JOB_ID=99", "SLURM_STEP_ID=0"},
			`slurm: SLURM_JOB_ID=99 is set but SLURM_STEP_NODELIST, SLURM_JOB_NODELIST and SLURM_NODELIST are not: inconsistent slurm environment`},
		{"bad node list", []string{"SLURM_JOB_ID=99", "SLURM_JOB_NODELIST=n[1-2"},
			`slurm: SLURM_JOB_NODELIST: slurm hostlist "n[1-2": column 1: unbalanced bracket`},
		{"node id too big", append(slices.Clone(base), "SLURM_NODEID=2"),
			`slurm: SLURM_NODEID=2 is not below the node count 2: inconsistent slurm environment`},
		{"node id negative", append(slices.Clone(base), "SLURM_NODEID=-1"),
			`slurm: SLURM_NODEID="-1" is not a non-negative number: inconsistent slurm environment`},
		{"node id not a number", append(slices.Clone(base), "SLURM_NODEID=one"),
			`slurm: SLURM_NODEID="one" is not a non-negative number: inconsistent slurm environment`},
		{"node count not a number", append(slices.Clone(base), "SLURM_JOB_NUM_NODES=2x"),
			`slurm: SLURM_JOB_NUM_NODES="2x" is not a non-negative number: inconsistent slurm environment`},
		{"node count zero", append(slices.Clone(base), "SLURM_JOB_NUM_NODES=0"),
			`slurm: SLURM_JOB_NUM_NODES=0: want at least 1 node: inconsistent slurm environment`},
		{"node count disagrees with list", append(slices.Clone(base), "SLURM_JOB_NUM_NODES=3"),
			`slurm: SLURM_JOB_NUM_NODES=3 but SLURM_JOB_NODELIST=n[1-2] names 2 hosts: inconsistent slurm environment`},
		{"old node count disagrees", []string{"SLURM_JOB_ID=99", "SLURM_NODELIST=n1", "SLURM_NNODES=4"},
			`slurm: SLURM_NNODES=4 but SLURM_NODELIST=n1 names 1 hosts: inconsistent slurm environment`},
		{"gpus not a number", append(slices.Clone(base), "SLURM_GPUS_ON_NODE=gfx942:8"),
			`slurm: SLURM_GPUS_ON_NODE="gfx942:8" is not a non-negative number: inconsistent slurm environment`},
		{"step tasks not a number", append(slices.Clone(base), "SLURM_STEP_ID=0", "SLURM_STEP_NODELIST=n[1-2]", "SLURM_STEP_NUM_TASKS=x"),
			`slurm: SLURM_STEP_NUM_TASKS="x" is not a non-negative number: inconsistent slurm environment`},
		{"step node count disagrees with step list", append(slices.Clone(base), "SLURM_STEP_ID=3", "SLURM_STEP_NODELIST=n1", "SLURM_STEP_NUM_NODES=2"),
			`slurm: SLURM_STEP_NUM_NODES=2 but SLURM_STEP_NODELIST=n1 names 1 hosts: inconsistent slurm environment`},
		{"node id counts within the step", append(slices.Clone(base), "SLURM_STEP_ID=3", "SLURM_STEP_NODELIST=n2", "SLURM_NODEID=1"),
			`slurm: SLURM_NODEID=1 is not below the node count 1: inconsistent slurm environment`},
		{"step gpus not indices", append(slices.Clone(base), "SLURM_STEP_ID=0", "SLURM_STEP_NODELIST=n[1-2]", "SLURM_GPUS_PER_NODE=2", "SLURM_STEP_GPUS=0,x"),
			`slurm: SLURM_STEP_GPUS="0,x": want GPU indices such as 0,1: inconsistent slurm environment`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := FromEnvWith(tt.env, nil)
			if err == nil {
				t.Fatalf("FromEnv = %+v, want error %s", got, tt.want)
			}
			if got != nil {
				t.Errorf("FromEnv returned a job with its error: %+v", got)
			}
			if err.Error() != tt.want {
				t.Errorf("error\n got %s\nwant %s", err, tt.want)
			}
			if strings.Contains(tt.want, "inconsistent slurm environment") && !errors.Is(err, ErrEnv) {
				t.Errorf("errors.Is(err, ErrEnv) = false")
			}
		})
	}
}

func TestFromEnvWithScontrol(t *testing.T) {
	run := func(name string, args ...string) ([]byte, error) {
		return []byte("c1\nc2\n"), nil
	}
	env := []string{"SLURM_JOB_ID=5", "SLURM_STEP_ID=0", "SLURM_STEP_NODELIST=c[1-2]", "SLURM_NODEID=1"}
	got, err := FromEnvWith(env, run)
	if err != nil {
		t.Fatal(err)
	}
	if got.MasterAddr != "c1" || got.NNodes != 2 || got.NodeRank != 1 || got.MasterPort != 20005 || got.Launchable() != nil {
		t.Errorf("FromEnvWith = %+v", got)
	}
}

func TestHostnames(t *testing.T) {
	type call struct {
		name string
		args []string
	}
	tests := []struct {
		name     string
		out      string
		err      error
		nilRun   bool
		want     []string
		wantCall bool
	}{
		{name: "scontrol wins", out: "gpu-a\ngpu-b\n", want: []string{"gpu-a", "gpu-b"}, wantCall: true},
		{name: "scontrol fails: parse", err: errors.New("exec: \"scontrol\": executable file not found in $PATH"), want: []string{"gpu01", "gpu02"}, wantCall: true},
		{name: "scontrol prints nothing: parse", out: "\n", want: []string{"gpu01", "gpu02"}, wantCall: true},
		{name: "no runner: parse", nilRun: true, want: []string{"gpu01", "gpu02"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls []call
			run := func(name string, args ...string) ([]byte, error) {
				calls = append(calls, call{name, args})
				return []byte(tt.out), tt.err
			}
			if tt.nilRun {
				run = nil
			}
			got, err := Hostnames("gpu[01-02]", run)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("Hostnames = %q, want %q", got, tt.want)
			}
			wantCalls := []call(nil)
			if tt.wantCall {
				wantCalls = []call{{"scontrol", []string{"show", "hostnames", "gpu[01-02]"}}}
			}
			if !reflect.DeepEqual(calls, wantCalls) {
				t.Errorf("calls = %q, want %q", calls, wantCalls)
			}
		})
	}
}

func TestHostnamesBothFail(t *testing.T) {
	run := func(string, ...string) ([]byte, error) { return nil, errors.New("exit status 1") }
	_, err := Hostnames("gpu[01-", run)
	if !errors.Is(err, ErrUnbalanced) {
		t.Errorf("Hostnames error = %v, want the parse error", err)
	}
}
