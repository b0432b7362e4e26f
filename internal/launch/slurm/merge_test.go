package slurm

import "testing"

func TestMerge(t *testing.T) {
	// Flag defaults as amdrun run declares them.
	defaults := Settings{NNodes: 1, NodeRank: 0, MasterAddr: "127.0.0.1", MasterPort: 0}
	job := &Job{JobID: "4242", NNodes: 4, NodeRank: 2, Hosts: []string{"g1", "g2", "g3", "g4"}, MasterAddr: "g1", MasterPort: 24242}
	tests := []struct {
		name    string
		flags   Settings
		changed []string
		job     *Job
		want    Settings
	}{
		{"no slurm: flags as given", defaults, nil, nil, defaults},
		{"no slurm: explicit flags kept", Settings{2, 1, "h0", 29500}, []string{FlagNNodes, FlagNodeRank, FlagMasterAddr, FlagMasterPort}, nil, Settings{2, 1, "h0", 29500}},
		{"slurm fills every default", defaults, nil, job, Settings{4, 2, "g1", 24242}},
		{"explicit port wins", Settings{1, 0, "127.0.0.1", 29500}, []string{FlagMasterPort}, job, Settings{4, 2, "g1", 29500}},
		{"explicit address wins", Settings{1, 0, "10.0.0.1", 0}, []string{FlagMasterAddr}, job, Settings{4, 2, "10.0.0.1", 24242}},
		{"explicit single node wins", Settings{1, 0, "127.0.0.1", 0}, []string{FlagNNodes, FlagNodeRank}, job, Settings{1, 0, "g1", 24242}},
		{"every flag explicit", Settings{2, 1, "h0", 1234}, []string{FlagNNodes, FlagNodeRank, FlagMasterAddr, FlagMasterPort}, job, Settings{2, 1, "h0", 1234}},
		{"unrelated flag changed", defaults, []string{"ngpus"}, job, Settings{4, 2, "g1", 24242}},
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
	if got := Merge(defaults, nil, job); got != (Settings{4, 2, "g1", 24242}) {
		t.Errorf("Merge with nil changed = %+v", got)
	}
}
