package slurm

import (
	"bufio"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/amdrun/amdrun/internal/envlist"
	"github.com/amdrun/amdrun/internal/testutil"
)

// readEnv reads one of the step environments captured from a real Slurm
// 22.05 cluster (testdata/slurm/env, see testdata/SOURCES.md).
func readEnv(t testing.TB, name string) []string {
	t.Helper()
	f, err := os.Open(testutil.Testdata(t, "slurm", "env", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var env []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := sc.Text(); strings.Contains(line, "=") {
			env = append(env, line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return env
}

// TestFromEnvRealSteps reads what real Slurm steps set. Each case names
// the job it was captured in.
func TestFromEnvRealSteps(t *testing.T) {
	tests := []struct {
		file      string
		nnodes    int
		nodeRank  int
		hosts     []string
		port      int
		nodeGPUs  int
		refuseHas string // "" = Launchable is nil
	}{
		// sbatch --nodes=2 --ntasks-per-node=1 --gpus-per-node=mi250:2; srun
		{file: "step-2nodes-node0.env", nnodes: 2, nodeRank: 0, hosts: []string{"node1", "node2"}, port: 20001, nodeGPUs: 2},
		{file: "step-2nodes-node1.env", nnodes: 2, nodeRank: 1, hosts: []string{"node1", "node2"}, port: 20001, nodeGPUs: 2},
		// the batch script of that job: SLURM_NODEID=0 is set there too
		{file: "batch-2nodes.env", nnodes: 2, nodeRank: 0, hosts: []string{"node1", "node2"}, port: 20001, nodeGPUs: 2,
			refuseHas: "outside a job step of a 2-node job"},
		// srun -N1 -n1 -r1 in a 2-node job: a one-node step on node2,
		// where SLURM_JOB_NODELIST, SLURM_NODELIST and SLURM_JOB_NUM_NODES
		// still describe the whole job
		{file: "step-1of2nodes-on-node2.env", nnodes: 1, nodeRank: 0, hosts: []string{"node2"}, port: 20006, nodeGPUs: 4},
		// sbatch -N2 --ntasks-per-node=1 --gpus-per-task=2; srun
		{file: "step-gpus-per-task-node1.env", nnodes: 2, nodeRank: 1, hosts: []string{"node1", "node2"}, port: 20007, nodeGPUs: 2},
		// srun --gpus-per-task=2 in a job of 2 tasks per node: task 1 on node1
		{file: "step-gpus-per-task-2tasks-per-node-task1.env", nnodes: 2, nodeRank: 0, hosts: []string{"node1", "node2"}, port: 20006, nodeGPUs: 2,
			refuseHas: "the step runs 4 tasks on 2 nodes (SLURM_STEP_TASKS_PER_NODE=2(x2))"},
		// sbatch --array=0-1 -N2: each task has its own SLURM_JOB_ID (task
		// 0 is job 3, task 1 job 2 = SLURM_ARRAY_JOB_ID), so two tasks
		// running at once on the same first node get different ports
		{file: "array-task0-node1.env", nnodes: 2, nodeRank: 1, hosts: []string{"node1", "node2"}, port: 20003, nodeGPUs: 1},
		{file: "array-task1-node1.env", nnodes: 2, nodeRank: 1, hosts: []string{"node1", "node2"}, port: 20002, nodeGPUs: 1},
		// sbatch -N1 --gpus-per-node=1 : -N1; srun --het-group=0,1
		{file: "het-step-both-components.env", nnodes: 2, nodeRank: 0, hosts: []string{"node1", "node2"}, port: 20004,
			refuseHas: "spans several components of a heterogeneous job (SLURM_HET_SIZE=2, SLURM_JOB_NODELIST=node[1-2])"},
		// ... and srun --het-group=0: one component, one node
		{file: "het-step-component0.env", nnodes: 1, nodeRank: 0, hosts: []string{"node1"}, port: 20004},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			j, err := FromEnvWith(readEnv(t, tt.file), nil)
			if err != nil {
				t.Fatalf("FromEnv: %v", err)
			}
			if j.NNodes != tt.nnodes || j.NodeRank != tt.nodeRank || !slices.Equal(j.Hosts, tt.hosts) ||
				j.MasterAddr != tt.hosts[0] || j.MasterPort != tt.port || j.NodeGPUs != tt.nodeGPUs {
				t.Errorf("got nnodes %d rank %d hosts %v master %s:%d node GPUs %d\nwant nnodes %d rank %d hosts %v master %s:%d node GPUs %d",
					j.NNodes, j.NodeRank, j.Hosts, j.MasterAddr, j.MasterPort, j.NodeGPUs,
					tt.nnodes, tt.nodeRank, tt.hosts, tt.hosts[0], tt.port, tt.nodeGPUs)
			}
			err = j.Launchable()
			switch {
			case tt.refuseHas == "" && err != nil:
				t.Errorf("Launchable: %v", err)
			case tt.refuseHas != "" && (err == nil || !strings.Contains(err.Error(), tt.refuseHas)):
				t.Errorf("Launchable = %v, want an error containing %q", err, tt.refuseHas)
			case err != nil && (!errors.Is(err, ErrShape) || strings.Contains(err.Error(), "\n")):
				t.Errorf("Launchable error %q: want one line wrapping ErrShape", err)
			}
		})
	}
}

// FuzzFromEnv varies the variables FromEnv reads, starting from the real
// captures: it must not panic, and a job it accepts must be consistent
// and refused, if at all, in one line.
func FuzzFromEnv(f *testing.F) {
	keys := []string{"SLURM_JOB_ID", "SLURM_STEP_ID", "SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_STEP_NUM_NODES",
		"SLURM_JOB_NUM_NODES", "SLURM_NODEID", "SLURM_STEP_NUM_TASKS", "SLURM_STEP_GPUS", "SLURM_GPUS_PER_NODE",
		"SLURM_HET_SIZE", "SLURM_JOB_NODELIST_HET_GROUP_0", "SLURM_JOB_GPUS", "GPU_DEVICE_ORDINAL", "SLURM_GPUS_ON_NODE"}
	files, _ := os.ReadDir(testutil.Testdata(f, "slurm", "env"))
	for _, e := range files {
		vars := envlist.Map(readEnv(f, e.Name()))
		var vals []string
		for _, k := range keys {
			vals = append(vals, vars[k])
		}
		f.Add(strings.Join(vals, "\x00"))
	}
	f.Fuzz(func(t *testing.T, joined string) {
		vals := strings.Split(joined, "\x00")
		var env []string
		for i, k := range keys {
			if i < len(vals) && vals[i] != "" {
				env = append(env, k+"="+vals[i])
			}
		}
		j, err := FromEnvWith(env, nil)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error of several lines: %q", err)
			}
			return
		}
		if j == nil {
			return
		}
		if j.NNodes != len(j.Hosts) || j.NNodes < 1 || j.NodeRank < 0 || j.NodeRank >= j.NNodes ||
			j.MasterAddr != j.Hosts[0] || j.MasterPort < BasePort || j.MasterPort >= BasePort+PortSpan ||
			j.Grant == nil || j.NodeGPUs > len(j.Grant.IDs) {
			t.Fatalf("inconsistent job %+v from %q", j, env)
		}
		if err := j.Launchable(); err != nil && (!errors.Is(err, ErrShape) || strings.Contains(err.Error(), "\n")) {
			t.Fatalf("Launchable: %q", err)
		}
	})
}
