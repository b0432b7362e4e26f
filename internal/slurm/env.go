package slurm

import (
	"cmp"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/amdrun/amdrun/internal/envlist"
)

// Port range of Job.MasterPort: BasePort + jobid % PortSpan, the same on
// every node of a job without talking to the others.
const (
	BasePort = 20000
	PortSpan = 20000
)

// ErrEnv is wrapped by every error of FromEnvWith: Slurm variables that are
// missing, not numbers, or that contradict each other.
var ErrEnv = errors.New("inconsistent slurm environment")

// ErrShape is wrapped by Job.Launchable's errors: a Slurm step of a shape
// that one amdrun per node cannot run.
var ErrShape = errors.New("cannot run in this slurm step")

// Job is this node's view of a Slurm allocation: of the job step amdrun
// runs in (srun) when there is one, else of the whole job. Inside a step
// SLURM_JOB_NODELIST, SLURM_JOB_NUM_NODES and SLURM_NODELIST keep the
// job's values while SLURM_NODEID counts within the step (Slurm 22.05:
// "srun -N1 -r1" in a 2-node job ran on node2 with SLURM_NODEID=0), so the
// step's own variables come first.
type Job struct {
	// JobID is SLURM_JOB_ID, a decimal number (each array task's own).
	JobID string
	// StepID is SLURM_STEP_ID (else SLURM_STEPID); "" outside a step.
	StepID string
	// NNodes is the length of Hosts, at least 1.
	NNodes int
	// NodeRank is SLURM_NODEID, 0 <= NodeRank < NNodes (0 when unset).
	NodeRank int
	// Hosts is the expanded node list of the step (SLURM_STEP_NODELIST),
	// outside a step of the job (SLURM_JOB_NODELIST, else SLURM_NODELIST),
	// in Slurm's order.
	Hosts []string
	// MasterAddr is the first host of Hosts (NodeRank 0).
	MasterAddr string
	// MasterPort is BasePort + JobID % PortSpan.
	MasterPort int
	// GPUsOnNode is SLURM_GPUS_ON_NODE (0: unset).
	GPUsOnNode int
	// NodeGPUs is len(Grant.IDs) when the job asked for GPUs per node or
	// per task, so that every node got as many; 0 otherwise (no GPUs, or
	// --gpus=N, which Slurm may spread unevenly).
	NodeGPUs int
	// Grant is the GPUs Slurm granted this task here; never nil.
	Grant *Grant

	// For Launchable: het is "" unless the step spans components of a
	// heterogeneous job; tasks is SLURM_STEP_NUM_TASKS (0: unset).
	nodeIDSet bool
	tasks     int
	tasksVar  string // its NAME=VALUE for messages
	het       string
}

// FromEnvWith reads the Slurm allocation from env (KEY=VALUE entries, a
// later one overriding an earlier); nil, nil outside one (SLURM_JOB_ID
// unset or empty). The node list is expanded with Hostnames(list, run).
// A missing node list, a value that is not a number, a node count that
// disagrees with the list, a node id outside 0..nnodes-1 or a GPU list
// that is not GPU numbers is an error wrapping ErrEnv naming the variable.
// Shapes amdrun cannot run are not errors here (see Job.Launchable).
func FromEnvWith(env []string, run func(name string, args ...string) ([]byte, error)) (*Job, error) {
	vars := envlist.Map(env)
	id := vars["SLURM_JOB_ID"]
	if id == "" {
		return nil, nil
	}
	jobID, err := envInt("SLURM_JOB_ID", id)
	if err != nil {
		return nil, err
	}
	j := &Job{JobID: id, MasterPort: BasePort + jobID%PortSpan}
	_, j.StepID = first(vars, "SLURM_STEP_ID", "SLURM_STEPID")
	// In order: the node id is checked against the node count.
	if err := cmp.Or(j.readNodes(vars, run), j.readNodeID(vars), j.readGPUs(vars), j.readTasks(vars)); err != nil {
		return nil, err
	}
	j.het = hetSpan(vars)
	return j, nil
}

// readNodes reads the node list (Hosts, MasterAddr) and checks the node
// count (NNodes) against it: the step's variables in a step, else the job's.
func (j *Job) readNodes(vars map[string]string, run func(name string, args ...string) ([]byte, error)) error {
	listVars := []string{"SLURM_JOB_NODELIST", "SLURM_NODELIST"}
	countVars := []string{"SLURM_JOB_NUM_NODES", "SLURM_NNODES"}
	if j.StepID != "" {
		listVars = []string{"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"}
		countVars = []string{"SLURM_STEP_NUM_NODES", "SLURM_NNODES"}
	}
	listVar, list := first(vars, listVars...)
	if list == "" {
		return fmt.Errorf("slurm: SLURM_JOB_ID=%s is set but %s and %s are not: %w",
			j.JobID, strings.Join(listVars[:len(listVars)-1], ", "), listVars[len(listVars)-1], ErrEnv)
	}
	var err error
	if j.Hosts, err = Hostnames(list, run); err != nil {
		return fmt.Errorf("slurm: %s: %w", listVar, err)
	}
	j.MasterAddr = j.Hosts[0]
	j.NNodes = len(j.Hosts)
	for _, name := range countVars {
		v, ok := vars[name]
		if !ok {
			continue
		}
		n, err := envInt(name, v)
		if err != nil {
			return err
		}
		if n < 1 {
			return fmt.Errorf("slurm: %s=%s: want at least 1 node: %w", name, v, ErrEnv)
		}
		if n != len(j.Hosts) {
			return fmt.Errorf("slurm: %s=%d but %s=%s names %d hosts: %w", name, n, listVar, list, len(j.Hosts), ErrEnv)
		}
		return nil
	}
	return nil
}

// readNodeID reads SLURM_NODEID into NodeRank, which must be below NNodes.
func (j *Job) readNodeID(vars map[string]string) error {
	v, ok := vars["SLURM_NODEID"]
	if !ok {
		return nil
	}
	var err error
	if j.NodeRank, err = envInt("SLURM_NODEID", v); err != nil {
		return err
	}
	if j.NodeRank >= j.NNodes {
		return fmt.Errorf("slurm: SLURM_NODEID=%d is not below the node count %d: %w", j.NodeRank, j.NNodes, ErrEnv)
	}
	j.nodeIDSet = true
	return nil
}

// readGPUs reads the task's GPU grant: Grant, GPUsOnNode and NodeGPUs.
func (j *Job) readGPUs(vars map[string]string) error {
	g, err := readGrant(vars, j.StepID != "")
	if err != nil {
		return err
	}
	j.Grant, j.GPUsOnNode = g, g.Count
	perTask := vars["SLURM_GPUS_PER_TASK"] != "" || strings.Contains(vars["SLURMD_TRES_BIND"], "gpu:per_task")
	if vars["SLURM_GPUS_PER_NODE"] != "" || perTask {
		j.NodeGPUs = len(g.IDs)
	}
	return nil
}

// readTasks reads the step's task count for Launchable.
func (j *Job) readTasks(vars map[string]string) error {
	v, ok := vars["SLURM_STEP_NUM_TASKS"]
	if j.StepID == "" || !ok {
		return nil
	}
	var err error
	if j.tasks, err = envInt("SLURM_STEP_NUM_TASKS", v); err != nil {
		return err
	}
	j.tasksVar = "SLURM_STEP_NUM_TASKS=" + v
	if per := vars["SLURM_STEP_TASKS_PER_NODE"]; per != "" {
		j.tasksVar = "SLURM_STEP_TASKS_PER_NODE=" + per
	}
	return nil
}

// Launchable returns nil when one amdrun per node can run the job as
// Slurm shaped it, else a one-line error wrapping ErrShape that says what
// to change: outside a step of a multi-node job, more tasks than nodes,
// or a step spanning components of a heterogeneous job.
func (j *Job) Launchable() error {
	switch {
	case j.het != "":
		return fmt.Errorf("slurm: %w: this step spans several components of a heterogeneous job (%s); run amdrun in one component (srun --het-group=N)", ErrShape, j.het)
	case j.StepID == "" && j.NNodes > 1:
		return fmt.Errorf("slurm: %w: amdrun runs outside a job step of a %d-node job (in the batch script or an salloc shell); start it with srun, one task per node (srun --ntasks-per-node=1 amdrun ...)", ErrShape, j.NNodes)
	case j.tasks > j.NNodes:
		return fmt.Errorf("slurm: %w: the step runs %d tasks on %d nodes (%s); amdrun starts one rank per GPU itself: run one task per node (srun --ntasks-per-node=1 amdrun ...)", ErrShape, j.tasks, j.NNodes, j.tasksVar)
	case !j.nodeIDSet && j.NNodes > 1:
		return fmt.Errorf("slurm: %w: SLURM_NODEID is not set in a %d-node step; start amdrun with srun, one task per node", ErrShape, j.NNodes)
	}
	return nil
}

// hetSpan describes a step that spans several components of a
// heterogeneous job, or returns "": in a step of one component Slurm sets
// SLURM_JOB_NODELIST to that component's list (Slurm 22.05).
func hetSpan(vars map[string]string) string {
	name, size := first(vars, "SLURM_HET_SIZE", "SLURM_PACK_SIZE")
	n, err := strconv.Atoi(size)
	if err != nil || n < 2 {
		return ""
	}
	list := vars["SLURM_JOB_NODELIST"]
	for i := 0; i < n; i++ {
		for _, prefix := range []string{"SLURM_JOB_NODELIST_HET_GROUP_", "SLURM_JOB_NODELIST_PACK_GROUP_"} {
			if c := vars[prefix+strconv.Itoa(i)]; c != "" && c == list {
				return ""
			}
		}
	}
	return fmt.Sprintf("%s=%s, SLURM_JOB_NODELIST=%s", name, size, list)
}

// Hostnames expands a Slurm node list with "scontrol show hostnames LIST"
// through run, else (nil run, failure, no output) with ParseHostlist.
func Hostnames(nodelist string, run func(name string, args ...string) ([]byte, error)) ([]string, error) {
	if run != nil {
		if out, err := run("scontrol", "show", "hostnames", nodelist); err == nil {
			if hosts := strings.Fields(string(out)); len(hosts) > 0 {
				return hosts, nil
			}
		}
	}
	return ParseHostlist(nodelist)
}

// first returns the first of names set and not empty, and its value.
func first(vars map[string]string, names ...string) (name, value string) {
	for _, n := range names {
		if v := vars[n]; v != "" {
			return n, v
		}
	}
	return "", ""
}

// envInt parses a non-negative decimal variable: bare digits, as Slurm
// writes them, so that values quoted in messages are one line.
func envInt(name, v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("slurm: %s=%q is not a non-negative number: %w", name, v, ErrEnv)
	}
	return n, nil
}
