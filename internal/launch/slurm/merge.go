package slurm

// Flag names Merge asks changed about: amdrun run's multi-node flags.
const (
	FlagNNodes     = "nnodes"
	FlagNodeRank   = "node-rank"
	FlagMasterAddr = "master-addr"
	FlagMasterPort = "master-port"
)

// Settings are the multi-node values that either come from flags or from
// the Slurm allocation.
type Settings struct {
	NNodes     int
	NodeRank   int
	MasterAddr string
	MasterPort int
}

// Merge applies the precedence rule: a flag the user set explicitly
// (changed(name) is true, with the names FlagNNodes ...) keeps its value;
// every other field takes the job's value. A nil job returns flags
// unchanged; a nil changed counts as no flag set. It does not check that
// the result is consistent (a --nnodes that contradicts Slurm's node id):
// the caller validates the merged settings as it validates flags.
func Merge(flags Settings, changed func(name string) bool, job *Job) Settings {
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
