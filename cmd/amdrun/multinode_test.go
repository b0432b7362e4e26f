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
	"sync/atomic"
	"testing"
)

// netns runs "ip args..." and fails the test on error.
func ip(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// netnsNode is one "host" of a two-node test: a network namespace, its
// end of the veth pair, its address, and a host name that resolves to
// that address on both nodes (through the namespace's /etc/hosts).
type netnsNode struct {
	ns, veth, addr, host string
}

var netnsSeq atomic.Int32

// netnsPair makes two network namespaces joined by a veth pair
// (10.200.0.1 and 10.200.0.2), each with an /etc/netns/NS/hosts that
// `ip netns exec` mounts over /etc/hosts and that names both nodes. It
// skips unless root (a skip that AMDRUN_REQUIRE_ROOT=1 makes a failure,
// as CI runs) and removes everything it made when the test ends.
func netnsPair(t *testing.T) [2]netnsNode {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("AMDRUN_REQUIRE_ROOT") == "1" {
			t.Fatal("network namespaces need root, and AMDRUN_REQUIRE_ROOT=1")
		}
		t.Skip("skipping: network namespaces need root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("skipping: no ip command (apt-get install iproute2)")
	}
	tag := fmt.Sprintf("%d%c", os.Getpid()%100000, 'a'+netnsSeq.Add(1)%26)
	var n [2]netnsNode
	for i := range n {
		n[i] = netnsNode{ns: fmt.Sprintf("amdrun%d-%s", i, tag), veth: fmt.Sprintf("amv%d-%s", i, tag),
			addr: fmt.Sprintf("10.200.0.%d", i+1), host: fmt.Sprintf("amdnode%d-%s", i, tag)}
	}
	if out, err := exec.Command("ip", "netns", "add", n[0].ns).CombinedOutput(); err != nil {
		t.Skipf("skipping: cannot make network namespaces here: %v %s", err, out)
	}
	_, statErr := os.Stat("/etc/netns")
	t.Cleanup(func() {
		for _, nd := range n {
			exec.Command("ip", "netns", "del", nd.ns).Run()
			os.RemoveAll(filepath.Join("/etc/netns", nd.ns)) // made below, named by this test
		}
		if statErr != nil {
			os.Remove("/etc/netns") // this test made it; only if empty
		}
	})
	ip(t, "netns", "add", n[1].ns)
	ip(t, "link", "add", n[0].veth, "type", "veth", "peer", "name", n[1].veth)
	hosts := fmt.Sprintf("127.0.0.1 localhost\n%s %s\n%s %s\n", n[0].addr, n[0].host, n[1].addr, n[1].host)
	for _, nd := range n {
		ip(t, "link", "set", nd.veth, "netns", nd.ns)
		ip(t, "-n", nd.ns, "addr", "add", nd.addr+"/30", "dev", nd.veth)
		ip(t, "-n", nd.ns, "link", "set", nd.veth, "up")
		ip(t, "-n", nd.ns, "link", "set", "lo", "up")
		dir := filepath.Join("/etc/netns", nd.ns)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "hosts"), []byte(hosts), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

// TestTwoNodesInNetworkNamespaces runs a real two-node job: two network
// namespaces joined by a veth pair stand for two hosts; amdrun runs once
// in each with --nnodes 2 and its --node-rank, each starting 2 ranks of
// the gloo all_reduce job. The 4 ranks must be 0-3 once each with the
// right sum.
func TestTwoNodesInNetworkNamespaces(t *testing.T) {
	testutil.EndToEnd(t)
	py := needTorch(t)
	n := netnsPair(t)
	script, _ := filepath.Abs("../../examples/allreduce_check.py")
	out := t.TempDir()
	var wg sync.WaitGroup
	results := make([]result, 2)
	errs := make([]error, 2)
	for node := 0; node < 2; node++ {
		wg.Add(1)
		env := cleanEnv(t, "GLOO_SOCKET_IFNAME="+n[node].veth) // t's methods stay on this goroutine
		go func(node int) {
			defer wg.Done()
			results[node], errs[node] = runJob(env, "__netns", n[node].ns, "--source", "example",
				"--nnodes", "2", "--node-rank", fmt.Sprint(node), "--master-addr", n[0].addr, "--master-port", "29561",
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
