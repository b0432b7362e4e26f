package slurm

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Port range of Job.MasterPort: BasePort + jobid % PortSpan, so 20000 to
// 39999. Every node of a job computes the same port without talking to
// the others, and two jobs sharing a first node collide only when their
// ids are equal modulo PortSpan.
const (
	BasePort = 20000
	PortSpan = 20000
)

// ErrEnv is wrapped by every error of FromEnv: Slurm variables that are
// missing, not numbers, or that contradict each other.
var ErrEnv = errors.New("inconsistent slurm environment")

// Job is this node's view of a Slurm allocation.
type Job struct {
	// JobID is SLURM_JOB_ID, a decimal number.
	JobID string
	// NNodes is the number of nodes of the job (SLURM_JOB_NUM_NODES,
	// else SLURM_NNODES, else the length of the node list); at least 1.
	NNodes int
	// NodeRank is SLURM_NODEID, 0 <= NodeRank < NNodes. It is 0 when
	// SLURM_NODEID is unset and the job has one node.
	NodeRank int
	// Hosts is the expanded node list (SLURM_JOB_NODELIST, else
	// SLURM_NODELIST), in Slurm's order.
	Hosts []string
	// MasterAddr is the first host of the node list: the node with
	// NodeRank 0, which hosts rank 0's store.
	MasterAddr string
	// MasterPort is BasePort + JobID % PortSpan.
	MasterPort int
	// GPUsOnNode is SLURM_GPUS_ON_NODE, the GPUs Slurm gave this node;
	// 0 when unset.
	GPUsOnNode int
	// TasksPerNode is SLURM_NTASKS_PER_NODE; 0 when unset. amdrun
	// expects one task per node (it starts the ranks itself), so a
	// caller may warn when this is above 1.
	TasksPerNode int
}

// FromEnv reads the Slurm allocation from env (KEY=VALUE entries, as
// os.Environ returns; a later entry overrides an earlier one). Outside an
// allocation (SLURM_JOB_ID unset or empty) it returns nil, nil. The node
// list is expanded with ParseHostlist; use FromEnvWith to ask scontrol.
//
// Inside an allocation a missing node list, a value that is not a
// number, a node count that disagrees with the node list, or a node id
// outside 0..nnodes-1 is an error wrapping ErrEnv that names the
// variable.
func FromEnv(env []string) (*Job, error) {
	return FromEnvWith(env, nil)
}

// FromEnvWith is FromEnv, expanding the node list with Hostnames(list,
// run): scontrol when run is not nil and succeeds, ParseHostlist
// otherwise.
func FromEnvWith(env []string, run func(name string, args ...string) ([]byte, error)) (*Job, error) {
	vars := envMap(env)
	id := vars["SLURM_JOB_ID"]
	if id == "" {
		return nil, nil
	}
	jobID, err := envInt("SLURM_JOB_ID", id)
	if err != nil {
		return nil, err
	}
	j := &Job{JobID: id, MasterPort: BasePort + jobID%PortSpan}

	listVar := "SLURM_JOB_NODELIST"
	list := vars[listVar]
	if list == "" {
		listVar = "SLURM_NODELIST"
		list = vars[listVar]
	}
	if list == "" {
		return nil, fmt.Errorf("slurm: SLURM_JOB_ID=%s is set but SLURM_JOB_NODELIST and SLURM_NODELIST are not: %w", id, ErrEnv)
	}
	if j.Hosts, err = Hostnames(list, run); err != nil {
		return nil, fmt.Errorf("slurm: %s: %w", listVar, err)
	}
	j.MasterAddr = j.Hosts[0]

	j.NNodes = len(j.Hosts)
	for _, name := range []string{"SLURM_JOB_NUM_NODES", "SLURM_NNODES"} {
		v, ok := vars[name]
		if !ok {
			continue
		}
		n, err := envInt(name, v)
		if err != nil {
			return nil, err
		}
		if n < 1 {
			return nil, fmt.Errorf("slurm: %s=%s: want at least 1 node: %w", name, v, ErrEnv)
		}
		if n != len(j.Hosts) {
			return nil, fmt.Errorf("slurm: %s=%d but %s=%s names %d hosts: %w", name, n, listVar, list, len(j.Hosts), ErrEnv)
		}
		break
	}

	if v, ok := vars["SLURM_NODEID"]; ok {
		if j.NodeRank, err = envInt("SLURM_NODEID", v); err != nil {
			return nil, err
		}
		if j.NodeRank >= j.NNodes {
			return nil, fmt.Errorf("slurm: SLURM_NODEID=%d is not below the node count %d: %w", j.NodeRank, j.NNodes, ErrEnv)
		}
	} else if j.NNodes > 1 {
		return nil, fmt.Errorf("slurm: SLURM_NODEID is not set in a %d-node job (start amdrun with srun, one task per node): %w", j.NNodes, ErrEnv)
	}

	if v, ok := vars["SLURM_GPUS_ON_NODE"]; ok {
		if j.GPUsOnNode, err = envInt("SLURM_GPUS_ON_NODE", v); err != nil {
			return nil, err
		}
	}
	if v, ok := vars["SLURM_NTASKS_PER_NODE"]; ok {
		if j.TasksPerNode, err = envInt("SLURM_NTASKS_PER_NODE", v); err != nil {
			return nil, err
		}
	}
	return j, nil
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

// envMap turns KEY=VALUE entries into a map; a later entry wins, as in
// os/exec. Entries without '=' are ignored.
func envMap(env []string) map[string]string {
	m := make(map[string]string, len(env))
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}

// envInt parses a non-negative decimal variable.
func envInt(name, v string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 0 {
		return 0, fmt.Errorf("slurm: %s=%q is not a non-negative number: %w", name, v, ErrEnv)
	}
	return n, nil
}
