package slurm

import "github.com/amdrun/amdrun/internal/plan"

// Flag names Merge asks changed about: amdrun run's multi-node flags.
const (
	FlagNNodes     = "nnodes"
	FlagNodeRank   = "node-rank"
	FlagMasterAddr = "master-addr"
	FlagMasterPort = "master-port"
)

// Merge applies the precedence rule to the multi-node values of flags
// (NNodes, NodeRank, MasterAddr, MasterPort), which either come from
// flags or from the Slurm allocation: a flag the user set explicitly
// (changed(name) is true, with the names FlagNNodes ...) keeps its value;
// every other of the four takes the job's value, and the rest of flags is
// kept. A nil job returns flags
// unchanged; a nil changed counts as no flag set. It does not check that
// the result is consistent (a --nnodes that contradicts Slurm's node id):
// the caller validates the merged settings as it validates flags.
func Merge(flags plan.Settings, changed func(name string) bool, job *Job) plan.Settings {
	if job == nil {
		return flags
	}
	set := func(name string) bool { return changed != nil && changed(name) }
	out := flags
	if !set(FlagNNodes) {
		out.NNodes = job.NNodes
	}
	if !set(FlagNodeRank) {
		out.NodeRank = job.NodeRank
	}
	if !set(FlagMasterAddr) {
		out.MasterAddr = job.MasterAddr
	}
	if !set(FlagMasterPort) {
		out.MasterPort = job.MasterPort
	}
	return out
}
