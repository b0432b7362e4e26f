package main_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/amdrun/amdrun/internal/launch"
	"github.com/amdrun/amdrun/internal/testutil"
)

// TestExclusiveGPUJobsGetFairShares (issue 34.4): on a node of 2 GPUs
// and 2 CPUs (this VM's NUMA node 0, the example topology cut to its
// first two devices), two concurrent 1-rank jobs bound exclusive get one
// CPU each, their GPU's share, read from /proc/PID/status while both
// run; before, the first took the node's every CPU and the second fell
// back to sharing them with a warning. amdrun ps shows each job's CPU.
func TestExclusiveGPUJobsGetFairShares(t *testing.T) {
	testutil.EndToEnd(t)
	own := launch.OwnCPUs()
	nodes, _ := filepath.Glob("/sys/devices/system/node/node*/cpulist")
	if len(own) != 2 || own[0] != 0 || own[1] != 1 || len(nodes) != 1 {
		t.Skipf("needs one NUMA node of CPUs 0 and 1 (has %v on %d nodes)", own, len(nodes))
	}
	topo := writeTopology(t, func(m map[string]any) {
		m["devices"] = m["devices"].([]any)[:2]
		var links []any
		for _, l := range m["links"].([]any) {
			if l := l.(map[string]any); l["a"].(float64) < 2 && l["b"].(float64) < 2 {
				links = append(links, l)
			}
		}
		m["links"] = links
	})
	out, script, env, py := holdSetup(t)
	job := func(name string) []string {
		return []string{"--topology", topo, "--ngpus", "1", "--numa-binding", "exclusive", "--no-python", py, script, out, name}
	}
	var wg sync.WaitGroup
	results := map[string]*result{}
	start := func(name string) <-chan struct{} {
		done, r := make(chan struct{}), &result{}
		results[name] = r
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(done)
			*r, _ = runJob(env, job(name)...)
		}()
		return done
	}
	release := func() { os.WriteFile(filepath.Join(out, "go"), nil, 0o644); wg.Wait() }
	defer release()
	doneA := start("a")
	pidA := waitRank(t, out, "a", []string{py, script, out, "a"}, doneA)
	doneB := start("b")
	pidB := waitRank(t, out, "b", []string{py, script, out, "b"}, doneB)
	cpuA, cpuB := cpusAllowed(t, pidA), cpusAllowed(t, pidB)
	if cpuA == cpuB || len(cpuA) != 1 || len(cpuB) != 1 {
		release()
		t.Fatalf("rank CPUs: job a %s, job b %s; want one CPU each, disjoint\n%s\n%s", cpuA, cpuB, results["a"].stderr, results["b"].stderr)
	}
	ps := runAmdrun(t, env, "ps")
	for _, cpu := range []string{"0", "1"} {
		if !regexp.MustCompile(`(?m)^` + cpu + `\tleased\tpid `).MatchString(ps.stdout) {
			t.Errorf("amdrun ps does not show CPU %s leased:\n%s%s", cpu, ps.stdout, ps.stderr)
		}
	}
	release()
	for name, r := range results {
		if r.code != 0 || strings.Contains(r.stderr, "bind") {
			t.Errorf("job %s: exit %d\n%s", name, r.code, r.stderr)
		}
	}
}
