package slurm_test

import (
	"fmt"

	"github.com/amdrun/amdrun/internal/plan"
	"github.com/amdrun/amdrun/internal/slurm"
)

func ExampleParseHostlist() {
	hosts, err := slurm.ParseHostlist("gpu[01-04,07],login1")
	fmt.Println(hosts, err)
	_, err = slurm.ParseHostlist("gpu[04-01]")
	fmt.Println(err)
	// Output:
	// [gpu01 gpu02 gpu03 gpu04 gpu07 login1] <nil>
	// slurm hostlist "gpu[04-01]": column 4: range end is below its start
}

func ExampleMerge() {
	job, _ := slurm.FromEnvWith([]string{
		"SLURM_JOB_ID=4242", "SLURM_JOB_NUM_NODES=2", "SLURM_NODEID=1", "SLURM_JOB_NODELIST=gpu[07-08]",
	}, nil)
	flags := plan.Settings{NNodes: 1, MasterAddr: "127.0.0.1", MasterPort: 29500}
	s := slurm.Merge(flags, slurm.Given{MasterPort: true}, job) // --master-port 29500 given
	fmt.Println(s.NNodes, s.NodeRank, s.MasterAddr, s.MasterPort)
	// Output:
	// 2 1 gpu07 29500
}
