package slurm_test

import (
	"fmt"

	"github.com/amdrun/amdrun/internal/launch/slurm"
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
	flags := slurm.Settings{NNodes: 1, MasterAddr: "127.0.0.1", MasterPort: 29500}
	changed := func(name string) bool { return name == slurm.FlagMasterPort } // --master-port 29500 given
	fmt.Printf("%+v\n", slurm.Merge(flags, changed, job))
	// Output:
	// {NNodes:2 NodeRank:1 MasterAddr:gpu07 MasterPort:29500}
}
