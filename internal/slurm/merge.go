package slurm

import "github.com/amdrun/amdrun/internal/plan"

// Given says which of amdrun run's multi-node flags the user gave.
type Given struct{ NNodes, NodeRank, MasterAddr, MasterPort bool }

// Merge gives the multi-node values of flags (NNodes, NodeRank,
// MasterAddr, MasterPort) the user did not give the job's values; a nil
// job returns flags unchanged. The caller validates the result.
func Merge(flags plan.Settings, given Given, job *Job) plan.Settings {
	if job == nil {
		return flags
	}
	if !given.NNodes {
		flags.NNodes = job.NNodes
	}
	if !given.NodeRank {
		flags.NodeRank = job.NodeRank
	}
	if !given.MasterAddr {
		flags.MasterAddr = job.MasterAddr
	}
	if !given.MasterPort {
		flags.MasterPort = job.MasterPort
	}
	return flags
}
