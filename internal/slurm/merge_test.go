package slurm

import (
	"testing"

	"github.com/amdrun/amdrun/internal/plan"
)

// st is the multi-node part of plan.Settings Merge reads.
func st(nnodes, nodeRank int, addr string, port int) plan.Settings {
	return plan.Settings{NNodes: nnodes, NodeRank: nodeRank, MasterAddr: addr, MasterPort: port}
}

func TestMerge(t *testing.T) {
	// Flag defaults as amdrun run declares them.
	defaults := st(1, 0, "127.0.0.1", 0)
	job := &Job{JobID: "4242", NNodes: 4, NodeRank: 2, Hosts: []string{"g1", "g2", "g3", "g4"}, MasterAddr: "g1", MasterPort: 24242}
	tests := []struct {
		name    string
		flags   plan.Settings
		changed []string
		job     *Job
		want    plan.Settings
	}{
		{"no slurm: flags as given", defaults, nil, nil, defaults},
		{"no slurm: explicit flags kept", st(2, 1, "h0", 29500), []string{FlagNNodes, FlagNodeRank, FlagMasterAddr, FlagMasterPort}, nil, st(2, 1, "h0", 29500)},
		{"slurm fills every default", defaults, nil, job, st(4, 2, "g1", 24242)},
		{"explicit port wins", st(1, 0, "127.0.0.1", 29500), []string{FlagMasterPort}, job, st(4, 2, "g1", 29500)},
		{"explicit address wins", st(1, 0, "10.0.0.1", 0), []string{FlagMasterAddr}, job, st(4, 2, "10.0.0.1", 24242)},
		{"explicit single node wins", st(1, 0, "127.0.0.1", 0), []string{FlagNNodes, FlagNodeRank}, job, st(1, 0, "g1", 24242)},
		{"every flag explicit", st(2, 1, "h0", 1234), []string{FlagNNodes, FlagNodeRank, FlagMasterAddr, FlagMasterPort}, job, st(2, 1, "h0", 1234)},
		{"unrelated flag changed", defaults, []string{"ngpus"}, job, st(4, 2, "g1", 24242)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			changed := func(name string) bool {
				for _, c := range tt.changed {
					if c == name {
						return true
					}
				}
				return false
			}
			if got := Merge(tt.flags, changed, tt.job); got != tt.want {
				t.Errorf("Merge = %+v, want %+v", got, tt.want)
			}
		})
	}
	if got := Merge(defaults, nil, job); got != (st(4, 2, "g1", 24242)) {
		t.Errorf("Merge with nil changed = %+v", got)
	}
}
