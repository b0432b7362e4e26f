package launch

import (
	"errors"
	"github.com/amdrun/amdrun/internal/discover"
	"github.com/amdrun/amdrun/internal/topology"
	"reflect"
	"strconv"
	"strings"
	"testing"
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
		for k := range EnvMap(r.Env) {
			if !known[k] {
				t.Errorf("rank %d: the plan sets %s, which RankVars does not list (dry runs would hide it)", r.Rank, k)
			}
		}
	}
}

func TestPlanJob(t *testing.T) {
	m := seedNode(t)
	// Two NUMA nodes made of the CPUs this test may run on, so that PlanJob's
	// own affinity leaves both bindable.
	own := ownCPUs()
	if len(own) < 2 {
		t.Skipf("needs 2 CPUs to make 2 NUMA nodes of, has %v", own)
	}
	host := []topology.NUMANode{{ID: 0, CPUs: own[:len(own)/2]}, {ID: 1, CPUs: own[len(own)/2:]}}
	t.Run("defaults: free port, numa binding on a 2-node host, argv -", func(t *testing.T) {
		p, err := PlanJob(Job{Model: m, Chosen: []int{6, 7}, HostNUMA: host})
		if err != nil {
			t.Fatal(err)
		}
		env := EnvMap(p.Ranks[0].Env)
		port, _ := strconv.Atoi(env["MASTER_PORT"])
		if port <= 0 || port == DefaultMasterPort {
			t.Errorf("MASTER_PORT %q: want a free port chosen now", env["MASTER_PORT"])
		}
		if p.Bind != BindNUMA || p.Ranks[1].NUMANode != 1 {
			t.Errorf("bind %s, rank 1 on node %d: want numa, node 1 (device 7's)", p.Bind, p.Ranks[1].NUMANode)
		}
		if !reflect.DeepEqual(p.Ranks[0].Argv, []string{"-"}) || env["HIP_VISIBLE_DEVICES"] != "6,7" {
			t.Errorf("argv %q visible %q", p.Ranks[0].Argv, env["HIP_VISIBLE_DEVICES"])
		}
		if !strings.HasPrefix(env["TORCHELASTIC_RUN_ID"], "amdrun-") || len(env["TORCHELASTIC_RUN_ID"]) != len("amdrun-")+12 {
			t.Errorf("run id %q", env["TORCHELASTIC_RUN_ID"])
		}
	})
	t.Run("one NUMA node: not bound", func(t *testing.T) {
		p, err := PlanJob(Job{Model: m, Chosen: []int{0}, HostNUMA: host[:1], MasterPort: 1234, Argv: []string{"x"}})
		if err != nil {
			t.Fatal(err)
		}
		if p.Bind != BindNone || p.Ranks[0].CPUs != nil || EnvMap(p.Ranks[0].Env)["MASTER_PORT"] != "1234" {
			t.Errorf("bind %s cpus %v env %v", p.Bind, p.Ranks[0].CPUs, p.Ranks[0].Env)
		}
	})
	t.Run("4 devices for 1 rank under the user's mask: one process sees them all, in the user's tokens", func(t *testing.T) {
		mask, err := ParseMask([]string{"CUDA_VISIBLE_DEVICES=7,6,1,0"}, m.Devices)
		if err != nil {
			t.Fatal(err)
		}
		p, err := PlanJob(Job{Model: m, Chosen: []int{0, 1, 6, 7}, DevicesPerRank: 4, Mask: mask, HostNUMA: host, MasterPort: 1,
			RunID: "job9", Role: "server"})
		if err != nil {
			t.Fatal(err)
		}
		env := EnvMap(p.Ranks[0].Env)
		if len(p.Ranks) != 1 || env["CUDA_VISIBLE_DEVICES"] != "0,1,6,7" || env["WORLD_SIZE"] != "1" {
			t.Errorf("%d ranks, CUDA_VISIBLE_DEVICES %q, WORLD_SIZE %s; want 1 rank seeing 0,1,6,7", len(p.Ranks), env["CUDA_VISIBLE_DEVICES"], env["WORLD_SIZE"])
		}
		if !reflect.DeepEqual(p.Ranks[0].NUMANodes, []int{0, 1}) || env["TORCHELASTIC_RUN_ID"] != "job9" || env["ROLE_NAME"] != "server" || p.RunID != "job9" {
			t.Errorf("NUMA nodes %v, run id %q/%q, role %q", p.Ranks[0].NUMANodes, env["TORCHELASTIC_RUN_ID"], p.RunID, env["ROLE_NAME"])
		}
	})
	t.Run("CPU ranks need no model", func(t *testing.T) {
		p, err := PlanJob(Job{CPURanks: 3, HostNUMA: host, MasterPort: 1, Argv: []string{"x"}})
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Ranks) != 3 || p.Bind != BindNUMA || p.Ranks[2].NUMANode != 1 || p.Ranks[0].NUMANode != 0 {
			t.Errorf("%d ranks, bind %s, nodes %d..%d; want 3 ranks spread over nodes 0 and 1", len(p.Ranks), p.Bind, p.Ranks[0].NUMANode, p.Ranks[2].NUMANode)
		}
	})
	t.Run("a choice outside the user's mask is refused", func(t *testing.T) {
		mask, err := ParseMask([]string{"HIP_VISIBLE_DEVICES=0,1"}, m.Devices)
		if err != nil {
			t.Fatal(err)
		}
		_, err = PlanJob(Job{Model: m, Chosen: []int{2}, Mask: mask, MasterPort: 1})
		if !errors.Is(err, ErrMask) {
			t.Errorf("err %v, want ErrMask", err)
		}
	})
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
		want string
	}{
		{"standalone", Torchrun{NNodes: "1", Args: []string{"train.py", "--lr", "1"}},
			"torchrun --nproc_per_node 4 --nnodes 1 --standalone train.py --lr 1"},
		{"static multi-node", Torchrun{NNodes: "2", NodeRank: 1, MasterAddr: "n0", MasterPort: 29400, NoPython: true, Args: []string{"./a.out"}},
			"torchrun --nproc_per_node 4 --nnodes 2 --node_rank 1 --master_addr n0 --master_port 29400 --no_python ./a.out"},
		{"elastic", Torchrun{NNodes: "1:4", MaxRestarts: 3, Module: true, Args: []string{"pkg.mod"},
			Rdzv:  map[string]string{"id": "j", "backend": "c10d", "endpoint": "n0:29400"},
			Extra: []string{"--role", "r", "-t", "3"}},
			"torchrun --nproc_per_node 4 --nnodes 1:4 --rdzv_backend c10d --rdzv_endpoint n0:29400 --rdzv_id j --max_restarts 3 --role r -t 3 -m pkg.mod"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.t.UserEnv = user
			tp := TorchrunPlan(p, tc.t)
			if len(tp.Ranks) != 1 || strings.Join(tp.Ranks[0].Argv, " ") != tc.want {
				t.Fatalf("argv %q\nwant %q", tp.Ranks[0].Argv, tc.want)
			}
			env := EnvMap(tp.Ranks[0].Env)
			for _, k := range []string{"RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_PORT", "TORCHELASTIC_RUN_ID"} {
				if _, ok := env[k]; ok {
					t.Errorf("torchrun's environment has %s: torchrun sets it per worker", k)
				}
			}
			if env["HIP_VISIBLE_DEVICES"] != "4,5,0,1" || env["OMP_NUM_THREADS"] != "3" || env["PATH"] != "/usr/bin" {
				t.Errorf("lost the visible devices or the user's settings: %v", env)
			}
			if tp.Ranks[0].Bound() || tp.Bind != BindNone {
				t.Errorf("torchrun itself is bound: %+v", tp.Ranks[0])
			}
		})
	}
}
