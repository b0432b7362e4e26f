package job

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestScontrolCannotHoldTheJob: in a Slurm allocation whose scontrol
// never answers (no DNS, no controller: CI's sandbox took 30 s a call),
// Resolve gives scontrol a deadline of its own and expands the node list
// itself.
func TestScontrolCannotHoldTheJob(t *testing.T) {
	env := []string{"SLURM_JOB_ID=1", "SLURM_JOB_NODELIST=node[1-2]", "SLURM_JOB_NUM_NODES=2", "SLURM_NNODES=2", "SLURM_NODEID=0", "SLURM_NTASKS=2", "SLURM_NTASKS_PER_NODE=1",
		"SLURM_STEP_ID=0", "SLURM_STEP_NODELIST=node[1-2]", "SLURM_STEP_NUM_NODES=2", "SLURM_STEP_NUM_TASKS=2", "SLURM_STEP_TASKS_PER_NODE=1(x2)"}
	var left time.Duration
	scontrol := func(ctx context.Context, name string, args ...string) ([]byte, error) {
		dl, ok := ctx.Deadline()
		if !ok {
			return nil, errors.New("scontrol asked without a deadline")
		}
		left = time.Until(dl)
		return nil, context.DeadlineExceeded // as a scontrol killed at its deadline
	}
	o, _, err := resolvedWith(t, env, func(o *Options) { o.Run = scontrol }, func(l *CommandLine) {
		give(&l.NProcPerNode, "nproc-per-node", "1")
	})
	if err != nil {
		t.Fatal(err)
	}
	if left <= 0 || left > 5*time.Second {
		t.Errorf("scontrol's deadline %v away, want a few seconds", left)
	}
	if o.Slurm == nil || len(o.Slurm.Hosts) != 2 || o.Slurm.Hosts[1] != "node2" || o.NNodes != 2 {
		t.Errorf("Slurm job %+v, nnodes %d: want node1 and node2 from the node list", o.Slurm, o.NNodes)
	}
}
