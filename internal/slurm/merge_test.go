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
		name  string
		flags plan.Settings
		given Given
		job   *Job
		want  plan.Settings
	}{
		{"no slurm: flags as given", defaults, Given{}, nil, defaults},
		{"no slurm: explicit flags kept", st(2, 1, "h0", 29500), Given{true, true, true, true}, nil, st(2, 1, "h0", 29500)},
		{"slurm fills every default", defaults, Given{}, job, st(4, 2, "g1", 24242)},
		{"explicit port wins", st(1, 0, "127.0.0.1", 29500), Given{MasterPort: true}, job, st(4, 2, "g1", 29500)},
		{"explicit address wins", st(1, 0, "10.0.0.1", 0), Given{MasterAddr: true}, job, st(4, 2, "10.0.0.1", 24242)},
		{"explicit single node wins", st(1, 0, "127.0.0.1", 0), Given{NNodes: true, NodeRank: true}, job, st(1, 0, "g1", 24242)},
		{"every flag explicit", st(2, 1, "h0", 1234), Given{true, true, true, true}, job, st(2, 1, "h0", 1234)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Merge(tt.flags, tt.given, tt.job); got != tt.want {
				t.Errorf("Merge = %+v, want %+v", got, tt.want)
			}
		})
	}
}
