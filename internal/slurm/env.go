package slurm

import (
	"cmp"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/amdrun/amdrun/internal/envlist"
)

// Port range of Job.MasterPort: BasePort + jobid % PortSpan, so 20000 to
// 39999. Every node of a job computes the same port without talking to
// the others, and two jobs sharing a first node collide only when their
// ids are equal modulo PortSpan.
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
// runs in (srun) when there is one, else of the whole job (a batch script
// or an salloc shell).
//
// Inside a step Slurm keeps the job's values in SLURM_JOB_NODELIST,
// SLURM_JOB_NUM_NODES and even SLURM_NODELIST, while SLURM_NODEID counts
// within the step (seen with Slurm 22.05: "srun -N1 -r1" in a 2-node job
// runs on node2 with SLURM_NODEID=0, SLURM_STEP_NODELIST=node2 and
// SLURM_JOB_NODELIST=node[1-2]), so the step's own variables come first.
type Job struct {
	// JobID is SLURM_JOB_ID, a decimal number. Each task of a job array
	// has its own (SLURM_ARRAY_JOB_ID is shared and not used).
	JobID string
	// StepID is SLURM_STEP_ID (else SLURM_STEPID); "" outside a step.
	StepID string
	// NNodes is the number of nodes of the step (SLURM_STEP_NUM_NODES),
	// outside a step of the job (SLURM_JOB_NUM_NODES, else SLURM_NNODES),
	// else the length of the node list; at least 1.
	NNodes int
	// NodeRank is SLURM_NODEID, 0 <= NodeRank < NNodes. It is 0 when
	// SLURM_NODEID is unset.
	NodeRank int
	// Hosts is the expanded node list of the step (SLURM_STEP_NODELIST),
	// outside a step of the job (SLURM_JOB_NODELIST, else SLURM_NODELIST),
	// in Slurm's order.
	Hosts []string
	// MasterAddr is the first host of Hosts: the node with NodeRank 0,
	// which hosts rank 0's store.
	MasterAddr string
	// MasterPort is BasePort + JobID % PortSpan.
	MasterPort int
	// GPUsOnNode is SLURM_GPUS_ON_NODE, the GPUs Slurm gave this node;
	// 0 when unset.
	GPUsOnNode int
	// NodeGPUs is the number of GPUs Slurm bound to this task (the
	// entries of Grant.IDs: SLURM_STEP_GPUS, outside a step SLURM_JOB_GPUS) when
	// the job asked for GPUs per node or per task (SLURM_GPUS_PER_NODE,
	// SLURM_GPUS_PER_TASK or a gpu:per_task SLURMD_TRES_BIND), so that
	// every node of the step got as many. 0 otherwise (no GPUs, or
	// --gpus=N, which Slurm may spread unevenly).
	NodeGPUs int
	// Grant is the GPUs Slurm granted this task on this node; never nil
	// (an empty Grant when none were).
	Grant *Grant

	// nodeIDSet, tasks and het feed Launchable.
	nodeIDSet bool
	tasks     int    // SLURM_STEP_NUM_TASKS; 0 outside a step or unset
	tasksVar  string // its NAME=VALUE for messages
	het       string // "" unless the step spans components of a heterogeneous job
}

// FromEnvWith reads the Slurm allocation from env (KEY=VALUE entries, as
// os.Environ returns; a later entry overrides an earlier one). Outside an
// allocation (SLURM_JOB_ID unset or empty) it returns nil, nil. The node
// list is expanded with Hostnames(list, run): scontrol when run is not
// nil and succeeds, ParseHostlist otherwise.
//
// Inside an allocation a missing node list, a value that is not a
// number, a node count that disagrees with the node list, a node id
// outside 0..nnodes-1, or a GPU list that is not GPU numbers is an error
// wrapping ErrEnv that names the variable. Shapes amdrun cannot run (see
// Job.Launchable) are not errors here: a caller that ignores Slurm's
// shape (an explicit --nnodes) may still run.
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
	if err := j.readNodes(vars, run); err != nil {
		return nil, err
	}
	if err := cmp.Or(j.readNodeID(vars), j.readGPUs(vars), j.readTasks(vars)); err != nil {
		return nil, err
	}
	j.het = hetSpan(vars)
	return j, nil
}

// readNodes reads the node list (Hosts, MasterAddr) and checks the node
// count against it (NNodes): the step's variables inside a step, the
// job's outside.
func (j *Job) readNodes(vars map[string]string, run func(name string, args ...string) ([]byte, error)) error {
	listVars := []string{"SLURM_JOB_NODELIST", "SLURM_NODELIST"}
	countVars := []string{"SLURM_JOB_NUM_NODES", "SLURM_NNODES"}
	if j.StepID != "" {
		listVars = []string{"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"}
		countVars = []string{"SLURM_STEP_NUM_NODES", "SLURM_NNODES"}
	}
	listVar, list := first(vars, listVars...)
	if list == "" {
		return fmt.Errorf("slurm: SLURM_JOB_ID=%s is set but %s are not: %w", j.JobID, orList(listVars), ErrEnv)
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

// readTasks reads the step's task count, which Launchable compares with
// its node count.
func (j *Job) readTasks(vars map[string]string) error {
	if j.StepID == "" {
		return nil
	}
	v, ok := vars["SLURM_STEP_NUM_TASKS"]
	if !ok {
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
// Slurm shaped it, and otherwise a one-line error wrapping ErrShape that
// says what to change:
//   - outside a job step of a multi-node job (amdrun started in the batch
//     script or an salloc shell would run on one node only);
//   - a step with more tasks than nodes (amdrun starts one rank per GPU
//     itself; several amdruns on one node would all claim its node rank);
//   - a step spanning several components of a heterogeneous job (their
//     nodes differ in what they hold, and each component has its own
//     job id).
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
// heterogeneous job, or returns "". Slurm sets SLURM_HET_SIZE (formerly
// SLURM_PACK_SIZE) in every step of such a job; in a step confined to one
// component it sets SLURM_JOB_NODELIST to that component's node list
// (SLURM_JOB_NODELIST_HET_GROUP_<n>), in a step spanning several to their
// union (seen with Slurm 22.05).
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

// Hostnames expands a Slurm node list. When run is not nil it first asks
// "scontrol show hostnames LIST" (which knows every syntax the installed
// Slurm does) and uses its lines; when run is nil, fails or prints
// nothing, it falls back to ParseHostlist, whose error it returns.
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

// first returns the first of names that is set and not empty, and its
// value ("", "" when none is).
func first(vars map[string]string, names ...string) (name, value string) {
	for _, n := range names {
		if v := vars[n]; v != "" {
			return n, v
		}
	}
	return "", ""
}

// orList joins two or more names as "A, B and C".
func orList(names []string) string {
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// envInt parses a non-negative decimal variable. Slurm writes bare
// digits; anything else (spaces, a sign, a line break) is refused, so
// that values quoted back in messages are one line.
func envInt(name, v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("slurm: %s=%q is not a non-negative number: %w", name, v, ErrEnv)
	}
	return n, nil
}
