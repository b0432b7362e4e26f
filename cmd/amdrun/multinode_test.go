package main_test

import (
	"encoding/json"
	"fmt"
	"github.com/amdrun/amdrun/internal/testutil"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
)

// netns runs "ip args..." and fails the test on error.
func ip(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// TestTwoNodesInNetworkNamespaces runs a real two-node job: two network
// namespaces joined by a veth pair stand for two hosts; amdrun runs once
// in each with --nnodes 2 and its --node-rank, each starting 2 ranks of
// the gloo all_reduce job. The 4 ranks must be 0-3 once each with the
// right sum.
func TestTwoNodesInNetworkNamespaces(t *testing.T) {
	testutil.EndToEnd(t)
	py := needTorch(t)
	if os.Geteuid() != 0 {
		t.Skip("skipping: network namespaces need root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("skipping: no ip command (apt-get install iproute2)")
	}
	tag := fmt.Sprint(os.Getpid() % 100000)
	ns := []string{"amdrun0-" + tag, "amdrun1-" + tag}
	veth := []string{"amv0-" + tag, "amv1-" + tag}
	addr := []string{"10.200.0.1", "10.200.0.2"}
	if out, err := exec.Command("ip", "netns", "add", ns[0]).CombinedOutput(); err != nil {
		t.Skipf("skipping: cannot make network namespaces here: %v %s", err, out)
	}
	t.Cleanup(func() {
		exec.Command("ip", "netns", "del", ns[0]).Run()
		exec.Command("ip", "netns", "del", ns[1]).Run()
	})
	ip(t, "netns", "add", ns[1])
	ip(t, "link", "add", veth[0], "type", "veth", "peer", "name", veth[1])
	for i := 0; i < 2; i++ {
		ip(t, "link", "set", veth[i], "netns", ns[i])
		ip(t, "-n", ns[i], "addr", "add", addr[i]+"/30", "dev", veth[i])
		ip(t, "-n", ns[i], "link", "set", veth[i], "up")
		ip(t, "-n", ns[i], "link", "set", "lo", "up")
	}
	script, _ := filepath.Abs("../../examples/allreduce_check.py")
	out := t.TempDir()
	var wg sync.WaitGroup
	results := make([]result, 2)
	errs := make([]error, 2)
	for node := 0; node < 2; node++ {
		wg.Add(1)
		env := cleanEnv(t, "GLOO_SOCKET_IFNAME="+veth[node]) // t's methods stay on this goroutine
		go func(node int) {
			defer wg.Done()
			results[node], errs[node] = runJob(env, "__netns", ns[node], "--source", "example",
				"--nnodes", "2", "--node-rank", fmt.Sprint(node), "--master-addr", addr[0], "--master-port", "29561",
				"--ngpus", "2", "--python", py, script, out)
		}(node)
	}
	wg.Wait()
	for node, r := range results {
		if errs[node] != nil {
			t.Fatalf("node %d: %v", node, errs[node])
		}
		if r.code != 0 {
			t.Fatalf("node %d: exit %d\n%s\n%s", node, r.code, r.stdout, r.stderr)
		}
	}
	var ranks []int
	for rank := 0; rank < 4; rank++ {
		b, err := os.ReadFile(filepath.Join(out, fmt.Sprintf("rank%d.json", rank)))
		if err != nil {
			t.Fatalf("rank %d wrote no report: %v", rank, err)
		}
		var rr rankReport
		if err := json.Unmarshal(b, &rr); err != nil {
			t.Fatalf("rank %d report %q: %v", rank, b, err)
		}
		if rr.WorldSize != 4 || rr.Sum != 10 {
			t.Errorf("rank %d: world %d sum %v, want 4 and 10", rank, rr.WorldSize, rr.Sum)
		}
		ranks = append(ranks, rr.Rank)
	}
	sort.Ints(ranks)
	if fmt.Sprint(ranks) != "[0 1 2 3]" {
		t.Fatalf("ranks %v, want 0-3 once each", ranks)
	}
}
