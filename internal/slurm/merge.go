package slurm

import "github.com/amdrun/amdrun/internal/plan"

// Given says which of amdrun run's multi-node flags the user gave.
type Given struct{ NNodes, NodeRank, MasterAddr, MasterPort bool }

// Merge applies the precedence rule to the multi-node values of flags
// (NNodes, NodeRank, MasterAddr, MasterPort), which either come from
// flags or from the Slurm allocation: a flag the user gave keeps its
// value; every other of the four takes the job's value, and the rest of
// flags is kept. A nil job returns flags unchanged. It does not check
// that the result is consistent (a --nnodes that contradicts Slurm's node
// id): the caller validates the merged settings as it validates flags.
func Merge(flags plan.Settings, given Given, job *Job) plan.Settings {
	if job == nil {
		return flags
	}
	out := flags
	if !given.NNodes {
		out.NNodes = job.NNodes
	}
	if !given.NodeRank {
		out.NodeRank = job.NodeRank
	}
	if !given.MasterAddr {
		out.MasterAddr = job.MasterAddr
	}
	if !given.MasterPort {
		out.MasterPort = job.MasterPort
	}
	return out
}
