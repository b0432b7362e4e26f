package main_test

import (
	"fmt"
	"github.com/amdrun/amdrun/internal/testutil"
	"strings"
	"testing"
)

// TestNVSwitchChoiceFollowsNUMA: on an 8-GPU NVSwitch node (NV18 between
// every pair, GPUs 0-3 on NUMA 0 and 4-7 on NUMA 1) every set is equal in
// links, so the choice follows NUMA locality: K=2 and K=4 stay on one
// node, and --explain says that NUMA decided.
func TestNVSwitchChoiceFollowsNUMA(t *testing.T) {
	testutil.EndToEnd(t)
	n := newFakeNode(t)
	n.serveNvidia("hgx-h100-8gpu")
	for _, tc := range []struct {
		k    int
		want string
	}{{1, "0"}, {2, "0,1"}, {4, "0,1,2,3"}, {8, "0,1,2,3,4,5,6,7"}} {
		p := dryRun(t, n.env, "--source", "nvidia-smi", "--ngpus", fmt.Sprint(tc.k), "x.py")
		if p.VisibleDevices != tc.want {
			t.Errorf("K=%d: chose %q, want %q", tc.k, p.VisibleDevices, tc.want)
		}
		for _, r := range p.Ranks {
			if tc.k <= 4 && r.NUMANode != 0 {
				t.Errorf("K=%d: rank %d on NUMA %d, want every rank on node 0", tc.k, r.Rank, r.NUMANode)
			}
		}
	}
	r := runAmdrun(t, n.env, "--source", "nvidia-smi", "--ngpus", "4", "--dry-run", "--explain", "x.py")
	if r.code != 0 || !strings.Contains(r.stdout, "decided by numa: 1 vs 2 nodes") {
		t.Fatalf("--explain should say NUMA locality decided between equal NVSwitch sets:\n%s%s", r.stdout, r.stderr)
	}
}
