package job

import (
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/amdrun/amdrun/internal/discover"
	"github.com/amdrun/amdrun/internal/envlist"
	"github.com/amdrun/amdrun/internal/launch"
	"github.com/amdrun/amdrun/internal/plan"
	"github.com/amdrun/amdrun/internal/selector"
	"github.com/amdrun/amdrun/internal/topology"
)

// chose is a placement of devices on the bundled example under mask.
func chose(t *testing.T, mask *plan.Mask, devices ...int) *placement {
	t.Helper()
	m, err := discover.Example() // the seed MI250 node
	if err != nil {
		t.Fatal(err)
	}
	return &placement{model: m, mask: mask, choice: &selector.Choice{Devices: devices}}
}

func exampleMask(t *testing.T, env ...string) *plan.Mask {
	t.Helper()
	m, err := discover.Example()
	if err != nil {
		t.Fatal(err)
	}
	mask, err := plan.ParseMask(env, m.Devices)
	if err != nil {
		t.Fatal(err)
	}
	return mask
}

// TestPlanRanks is the plan stage's defaults and each setting reaching
// the plan: a free port, the default binding by the host's NUMA nodes,
// argv "-" without a script, the run id, per-rank devices, CPU ranks and
// the mask check.
func TestPlanRanks(t *testing.T) {
	// Two NUMA nodes made of the CPUs this test may run on, so that the
	// plan's own affinity leaves both bindable.
	own := launch.OwnCPUs()
	if len(own) < 2 {
		t.Skipf("needs 2 CPUs to make 2 NUMA nodes of, has %v", own)
	}
	host := []topology.NUMANode{{ID: 0, CPUs: own[:len(own)/2]}, {ID: 1, CPUs: own[len(own)/2:]}}
	t.Run("defaults: free port, numa binding on a 2-node host, argv -", func(t *testing.T) {
		p, err := planRanks(&Options{}, chose(t, exampleMask(t), 6, 7), nil, host, "", &cpuLeaser{})
		if err != nil {
			t.Fatal(err)
		}
		env := envlist.Map(p.Ranks[0].Env)
		port, _ := strconv.Atoi(env["MASTER_PORT"])
		if port <= 0 || port == plan.DefaultMasterPort {
			t.Errorf("MASTER_PORT %q: want a free port chosen now", env["MASTER_PORT"])
		}
		if p.Bound != plan.BindNUMA || p.Ranks[1].NUMANode != 1 {
			t.Errorf("bind %s, rank 1 on node %d: want numa, node 1 (device 7's)", p.Bound, p.Ranks[1].NUMANode)
		}
		if !reflect.DeepEqual(p.Ranks[0].Argv, []string{"-"}) || env["HIP_VISIBLE_DEVICES"] != "6,7" {
			t.Errorf("argv %q visible %q", p.Ranks[0].Argv, env["HIP_VISIBLE_DEVICES"])
		}
		if !strings.HasPrefix(env["TORCHELASTIC_RUN_ID"], "amdrun-") || len(env["TORCHELASTIC_RUN_ID"]) != len("amdrun-")+12 {
			t.Errorf("run id %q", env["TORCHELASTIC_RUN_ID"])
		}
	})
	t.Run("one NUMA node: not bound; the script through python", func(t *testing.T) {
		o := &Options{Planning: Planning{Settings: plan.Settings{MasterPort: 1234}, Python: "py", Module: true, Args: []string{"x", "-v"}}}
		p, err := planRanks(o, chose(t, exampleMask(t), 0), nil, host[:1], "", &cpuLeaser{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Bound != plan.BindNone || p.Ranks[0].CPUs != nil || envlist.Map(p.Ranks[0].Env)["MASTER_PORT"] != "1234" {
			t.Errorf("bind %s cpus %v env %v", p.Bound, p.Ranks[0].CPUs, p.Ranks[0].Env)
		}
		if want := []string{"py", "-u", "-m", "x", "-v"}; !reflect.DeepEqual(p.Ranks[0].Argv, want) {
			t.Errorf("argv %q, want %q", p.Ranks[0].Argv, want)
		}
	})
	t.Run("4 devices for 1 rank under the user's mask: one process sees them all, in the user's tokens", func(t *testing.T) {
		mask := exampleMask(t, "CUDA_VISIBLE_DEVICES=7,6,1,0")
		o := &Options{Selection: Selection{Ranks: Ranks{N: 1}}, Planning: Planning{Settings: plan.Settings{MasterPort: 1, RunID: "job9", Role: "server"}}}
		p, err := planRanks(o, chose(t, mask, 0, 1, 6, 7), nil, host, "", &cpuLeaser{})
		if err != nil {
			t.Fatal(err)
		}
		env := envlist.Map(p.Ranks[0].Env)
		if len(p.Ranks) != 1 || env["CUDA_VISIBLE_DEVICES"] != "0,1,6,7" || env["WORLD_SIZE"] != "1" {
			t.Errorf("%d ranks, CUDA_VISIBLE_DEVICES %q, WORLD_SIZE %s; want 1 rank seeing 0,1,6,7", len(p.Ranks), env["CUDA_VISIBLE_DEVICES"], env["WORLD_SIZE"])
		}
		if !reflect.DeepEqual(p.Ranks[0].NUMANodes, []int{0, 1}) || env["TORCHELASTIC_RUN_ID"] != "job9" || env["ROLE_NAME"] != "server" || p.RunID != "job9" {
			t.Errorf("NUMA nodes %v, run id %q/%q, role %q", p.Ranks[0].NUMANodes, env["TORCHELASTIC_RUN_ID"], p.RunID, env["ROLE_NAME"])
		}
	})
	t.Run("CPU ranks need no model", func(t *testing.T) {
		o := &Options{Planning: Planning{Settings: plan.Settings{MasterPort: 1}, Args: []string{"x"}, NoPython: true}}
		p, err := planRanks(o, &placement{cpuRanks: 3}, nil, host, "", &cpuLeaser{})
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Ranks) != 3 || p.Bound != plan.BindNUMA || p.Ranks[2].NUMANode != 1 || p.Ranks[0].NUMANode != 0 {
			t.Errorf("%d ranks, bind %s, nodes %d..%d; want 3 ranks spread over nodes 0 and 1", len(p.Ranks), p.Bound, p.Ranks[0].NUMANode, p.Ranks[2].NUMANode)
		}
	})
	t.Run("a choice outside the user's mask is refused", func(t *testing.T) {
		_, err := planRanks(&Options{Planning: Planning{Settings: plan.Settings{MasterPort: 1}}}, chose(t, exampleMask(t, "HIP_VISIBLE_DEVICES=0,1"), 2), nil, nil, "", &cpuLeaser{})
		if !errors.Is(err, plan.ErrMask) {
			t.Errorf("err %v, want ErrMask", err)
		}
	})
}
