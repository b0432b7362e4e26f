package plan

import (
	"reflect"
	"strings"
	"testing"

	"github.com/amdrun/amdrun/internal/discover"
	"github.com/amdrun/amdrun/internal/envlist"
	"github.com/amdrun/amdrun/internal/topology"
)

// seedNode is the bundled example: the seed MI250 node (best pair 0,1).
func seedNode(t *testing.T) *topology.Model {
	t.Helper()
	m, err := discover.Example() // the seed MI250 node: best 2 are 0,1
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestPlanSetsOnlyRankVars(t *testing.T) {
	s := baseSpec()
	s.Env = []string{"PATH=/usr/bin"} // nothing of the user's to keep
	p, err := NewPlan(s)
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{"PATH": true}
	for _, k := range RankVars {
		known[k] = true
	}
	for _, r := range p.Ranks {
		for k := range envlist.Map(r.Env) {
			if !known[k] {
				t.Errorf("rank %d: the plan sets %s, which RankVars does not list (dry runs would hide it)", r.Rank, k)
			}
		}
	}
}

func TestMaskNarrow(t *testing.T) {
	m := seedNode(t)
	none, _ := ParseMask(nil, m.Devices)
	two, _ := ParseMask([]string{"CUDA_VISIBLE_DEVICES=5,2"}, m.Devices)
	for _, tc := range []struct {
		mask *Mask
		list []int
		want []int
	}{
		{nil, nil, nil},
		{none, nil, nil},
		{none, []int{3, 1}, []int{3, 1}},
		{two, nil, []int{2, 5}},
		{two, []int{5, 6, 2}, []int{5, 2}},
		{two, []int{0}, []int{}},
	} {
		if got := tc.mask.Narrow(tc.list); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Narrow(%v) under %v = %#v, want %#v", tc.list, tc.mask.Candidates(), got, tc.want)
		}
	}
}

func TestTorchrunPlan(t *testing.T) {
	s := baseSpec()
	s.Env = append(s.Env, "OMP_NUM_THREADS=3") // the user's own: kept
	p, err := NewPlan(s)
	if err != nil {
		t.Fatal(err)
	}
	user := []string{"PATH=/usr/bin", "OMP_NUM_THREADS=3"}
	for _, tc := range []struct {
		name string
		t    Torchrun
		s    Settings // the ranks' plan's
		want string
	}{
		{"standalone", Torchrun{Args: []string{"train.py", "--lr", "1"}}, Settings{NNodes: 1},
			"torchrun --nproc_per_node 4 --nnodes 1 --standalone train.py --lr 1"},
		{"static multi-node", Torchrun{NoPython: true, Args: []string{"./a.out"}}, Settings{NNodes: 2, NodeRank: 1, MasterAddr: "n0", MasterPort: 29400},
			"torchrun --nproc_per_node 4 --nnodes 2 --node_rank 1 --master_addr n0 --master_port 29400 --no_python ./a.out"},
		{"elastic", Torchrun{ElasticNNodes: "1:4", Module: true, Args: []string{"pkg.mod"},
			Rdzv:  map[string]string{"id": "j", "backend": "c10d", "endpoint": "n0:29400"},
			Extra: []string{"--role", "r", "-t", "3"}}, Settings{MaxRestarts: 3},
			"torchrun --nproc_per_node 4 --nnodes 1:4 --rdzv_backend c10d --rdzv_endpoint n0:29400 --rdzv_id j --max_restarts 3 --role r -t 3 -m pkg.mod"},
		// Under the agent each worker starts through the bind shim, which
		// picks its lists by LOCAL_RANK and execs the rank's own command;
		// the shim's argv is launch's (launch.LocalShimArgs, tested there),
		// written out here so that the plan's tests need no supervision.
		{"agent with per-rank binding", Torchrun{ElasticNNodes: "1:2", Module: true, Args: []string{"ignored"},
			Rdzv: map[string]string{"backend": "c10d", "endpoint": "n0:1"},
			Shim: []string{"/amdrun", "__amdrun_bind", "--local-cpus", "16-31/16-31/0-15/0-15", "--local-mems", "1/1/0/0", "--mempolicy", "bind"}}, Settings{},
			"torchrun --nproc_per_node 4 --nnodes 1:2 --rdzv_backend c10d --rdzv_endpoint n0:1 --no_python /amdrun __amdrun_bind" +
				" --local-cpus 16-31/16-31/0-15/0-15 --local-mems 1/1/0/0 --mempolicy bind -- python -u train.py --lr 0.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.t.UserEnv = user
			p.Settings = tc.s
			tp := TorchrunPlan(p, tc.t)
			if len(tp.Ranks) != 1 || strings.Join(tp.Ranks[0].Argv, " ") != tc.want {
				t.Fatalf("argv %q\nwant %q", tp.Ranks[0].Argv, tc.want)
			}
			if tp.MaxRestarts != 0 {
				t.Errorf("torchrun's process is restarted %d times by amdrun: torchrun restarts its ranks", tp.MaxRestarts)
			}
			env := envlist.Map(tp.Ranks[0].Env)
			for _, k := range []string{"RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_PORT", "TORCHELASTIC_RUN_ID"} {
				if _, ok := env[k]; ok {
					t.Errorf("torchrun's environment has %s: torchrun sets it per worker", k)
				}
			}
			if env["HIP_VISIBLE_DEVICES"] != "4,5,0,1" || env["OMP_NUM_THREADS"] != "3" || env["PATH"] != "/usr/bin" {
				t.Errorf("lost the visible devices or the user's settings: %v", env)
			}
			if tp.Ranks[0].Bound() || tp.Bound != BindNone {
				t.Errorf("torchrun itself is bound: %+v", tp.Ranks[0])
			}
		})
	}
}
