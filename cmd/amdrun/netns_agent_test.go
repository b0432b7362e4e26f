package main_test

// Jobs torch's elastic agent runs, on two "hosts": network namespaces
// joined by a veth pair (netnsPair), each with its own host name, amdrun
// and lease directory, real torch.distributed over gloo (issue 23).
// Debian's torch 1.13 names the group's MASTER_ADDR by the host name of
// group rank 0 (socket.getfqdn), so each node runs in its own UTS
// namespace too, named as the namespaces' /etc/hosts names it.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/amdrun/amdrun/internal/testutil"
)

// agentWorker all-reduces RANK+1 over gloo and writes what it saw to
// OUT/NODE-pidPID.json (with
// its PID namespace: amdrun runs the workers in one of their own). Mode "late": a worker of a one-rank world then
// waits for the agent to restart it when the second node comes. Mode
// "kill": the node's first worker waits, to be killed or restarted.
// A worker left waiting exits 3 after 200 s, failing the job.
const agentWorker = `import json, os, sys, time
import torch, torch.distributed as dist
out, mode, node = sys.argv[1], sys.argv[2], os.environ["NETNS_NODE"]
ws, rank = int(os.environ["WORLD_SIZE"]), int(os.environ["RANK"])
first = False
if mode == "kill":
    try:
        os.close(os.open(os.path.join(out, node + ".first"), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        first = True
    except FileExistsError:
        pass
dist.init_process_group("gloo")
t = torch.tensor([float(rank + 1)])
dist.all_reduce(t)
rep = {k: os.environ.get(k) for k in ("LOCAL_RANK", "GROUP_RANK", "TORCHELASTIC_RESTART_COUNT", "MASTER_ADDR", "CUDA_VISIBLE_DEVICES")}
rep.update(node=node, pid=os.getpid(), pid_ns=os.readlink("/proc/self/ns/pid"), at=time.time(), rank=rank, world_size=ws, sum=t.item(), want=ws * (ws + 1) / 2)
path = os.path.join(out, "%s-pid%d.json" % (node, os.getpid()))
with open(path + ".tmp", "w") as f:
    json.dump(rep, f)
os.rename(path + ".tmp", path)
if rep["sum"] != rep["want"]:
    sys.exit(1)
if (mode == "late" and ws < 2) or (mode == "kill" and first):
    print("waiting for the agent, pid", os.getpid(), flush=True)
    time.sleep(200)
    sys.exit(3)
dist.destroy_process_group()
`

type agentReport struct {
	Node         string  `json:"node"`
	PID          int     `json:"pid"`
	PIDNS        string  `json:"pid_ns"` // amdrun runs the workers in a PID namespace
	At           float64 `json:"at"`
	Rank         int     `json:"rank"`
	WorldSize    int     `json:"world_size"`
	Sum          float64 `json:"sum"`
	Want         float64 `json:"want"`
	RestartCount string  `json:"TORCHELASTIC_RESTART_COUNT"`
	MasterAddr   string  `json:"MASTER_ADDR"`
	CUDAVisible  *string `json:"CUDA_VISIBLE_DEVICES"`
}

// nodeDeadline bounds every amdrun a test here starts: past it the
// node's whole process group is killed and the test fails with its
// output, rather than a stuck rendezvous hanging go test.
const nodeDeadline = 240 * time.Second

// agentNode is one amdrun started in a node's namespaces.
type agentNode struct {
	name           string
	cmd            *exec.Cmd
	ctx            context.Context
	stop           context.CancelFunc
	stdout, stderr bytes.Buffer
	done           chan struct{}
	code           int
	err            error
}

// startNode starts amdrun args on node nd (its network namespace, a UTS
// namespace with its host name, its own lease directory through env),
// in its own process group, killed whole at nodeDeadline.
func startNode(t *testing.T, nd netnsNode, name, py string, env []string, args ...string) *agentNode {
	t.Helper()
	ctx, stop := context.WithTimeout(context.Background(), nodeDeadline)
	// sethostname in the new UTS namespace, then exec amdrun: argv only.
	sethost := "import os, socket, sys; socket.sethostname(sys.argv[1]); os.execv(sys.argv[2], sys.argv[2:])"
	argv := append([]string{"netns", "exec", nd.ns, "unshare", "--uts", "--", py, "-c", sethost, nd.host, amdrunBin}, args...)
	n := &agentNode{name: name, ctx: ctx, stop: stop, done: make(chan struct{})}
	n.cmd = exec.CommandContext(ctx, "ip", argv...)
	n.cmd.Env = env
	n.cmd.Stdout, n.cmd.Stderr = &n.stdout, &n.stderr
	n.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	n.cmd.Cancel = func() error { return syscall.Kill(-n.cmd.Process.Pid, syscall.SIGKILL) }
	n.cmd.WaitDelay = 10 * time.Second
	if err := n.cmd.Start(); err != nil {
		stop()
		t.Fatalf("%s: %v", name, err)
	}
	go func() {
		defer close(n.done)
		err := n.cmd.Wait()
		if ee, ok := err.(*exec.ExitError); ok {
			n.code, err = ee.ExitCode(), nil
		}
		n.err = err
	}()
	t.Cleanup(func() { stop(); <-n.done })
	return n
}

// wait waits for the node's amdrun and fails the test, with its output,
// unless it exited 0 within its deadline without a Go stack trace.
func (n *agentNode) wait(t *testing.T) {
	t.Helper()
	<-n.done
	n.stop()
	switch {
	case n.ctx.Err() == context.DeadlineExceeded:
		t.Fatalf("%s: still running after %v (killed)\nstdout:\n%s\nstderr:\n%s", n.name, nodeDeadline, n.stdout.String(), n.stderr.String())
	case n.err != nil || n.code != 0:
		t.Fatalf("%s: exit %d, %v\nstdout:\n%s\nstderr:\n%s", n.name, n.code, n.err, n.stdout.String(), n.stderr.String())
	case strings.Contains(n.stderr.String(), "goroutine ") || strings.Contains(n.stderr.String(), "panic:"):
		t.Fatalf("%s: printed a Go stack trace:\n%s", n.name, n.stderr.String())
	}
	if !strings.Contains(n.stderr.String(), "torch's elastic agent (python -m torch.distributed.run) runs the rendezvous") {
		t.Errorf("%s: no line says the agent runs the job:\n%s", n.name, n.stderr.String())
	}
}

// waitReport waits (within the nodes' deadline) for a report of node
// that ok accepts, and returns it; a node that ended first fails t.
func waitReport(t *testing.T, out, node string, ok func(agentReport) bool, nodes ...*agentNode) agentReport {
	t.Helper()
	deadline := time.Now().Add(nodeDeadline)
	for time.Now().Before(deadline) {
		for _, r := range agentReports(t, out)[node] {
			if ok(r) {
				return r
			}
		}
		for _, n := range nodes {
			select {
			case <-n.done:
				n.wait(t)
				t.Fatalf("%s ended before %s reported", n.name, node)
			default:
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, n := range nodes {
		t.Logf("%s so far:\n%s\n%s", n.name, n.stdout.String(), n.stderr.String())
	}
	t.Fatalf("no report from %s within %v", node, nodeDeadline)
	return agentReport{}
}

// agentReports reads every worker report in out, by node, in the order
// the workers reported.
func agentReports(t *testing.T, out string) map[string][]agentReport {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(out, "*-pid*.json"))
	by := map[string][]agentReport{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var r agentReport
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatalf("%s: %v: %q", f, err, b)
		}
		by[r.Node] = append(by[r.Node], r)
	}
	for _, rs := range by {
		sort.Slice(rs, func(i, j int) bool { return rs[i].At < rs[j].At })
	}
	return by
}

// hostPIDOf finds the pid, as this test sees it, of the worker that
// wrote r: the process in r's PID namespace whose NSpid ends with r's pid.
func hostPIDOf(t *testing.T, r agentReport) int {
	t.Helper()
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		if ns, err := os.Readlink(filepath.Join(d, "ns", "pid")); err != nil || ns != r.PIDNS {
			continue
		}
		st, err := os.ReadFile(filepath.Join(d, "status"))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(st), "\n") {
			if f := strings.Fields(line); len(f) > 2 && f[0] == "NSpid:" && f[len(f)-1] == fmt.Sprint(r.PID) {
				pid, _ := strconv.Atoi(f[1])
				return pid
			}
		}
	}
	t.Fatalf("no process of PID namespace %s has pid %d there", r.PIDNS, r.PID)
	return 0
}

// agentSetup is what the three tests share: the node pair, the patched
// interpreter, the worker script, the report directory, and each node's
// environment (its own lease directory, its name, gloo on its veth).
func agentSetup(t *testing.T) (n [2]netnsNode, sys, script, out string, envs [2][]string) {
	var py string
	testutil.EndToEnd(t)
	sys = needTorch(t)
	n = netnsPair(t)
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("skipping: no unshare (apt-get install util-linux)")
	}
	py = patchedPython(t, sys)
	out = t.TempDir()
	script = filepath.Join(t.TempDir(), "worker.py")
	if err := os.WriteFile(script, []byte(agentWorker), 0o644); err != nil {
		t.Fatal(err)
	}
	for i := range envs {
		envs[i] = setEnv(cleanEnv(t, "OMP_NUM_THREADS=1", "GLOO_SOCKET_IFNAME="+n[i].veth, fmt.Sprintf("NETNS_NODE=n%d", i)), "PYTHON_EXEC", py)
	}
	return n, sys, script, out, envs
}

// agentLine is a torchrun line for the agent: one rank per node, a c10d
// rendezvous on node 0's veth address.
func agentLine(n [2]netnsNode, nnodes, id string, port int, extra ...string) []string {
	args := []string{"--source", "example", "--nnodes", nnodes, "--nproc-per-node", "1",
		"--rdzv-backend", "c10d", "--rdzv-endpoint", fmt.Sprintf("%s:%d", n[0].addr, port), "--rdzv-id", id,
		"--monitor-interval", "1"}
	return append(args, extra...)
}

// checkGroup checks that the two reports are one group of two: ranks 0
// and 1, the sum of both, the master on node 0, each shown a device.
func checkGroup(t *testing.T, n [2]netnsNode, a, b agentReport) {
	t.Helper()
	for _, r := range []agentReport{a, b} {
		if r.WorldSize != 2 || r.Sum != 3 {
			t.Errorf("%s pid %d: world %d sum %v, want 2 and 3", r.Node, r.PID, r.WorldSize, r.Sum)
		}
		if r.MasterAddr != n[0].host {
			t.Errorf("%s pid %d: MASTER_ADDR %q, want node 0 (%s)", r.Node, r.PID, r.MasterAddr, n[0].host)
		}
		if r.CUDAVisible == nil || *r.CUDAVisible == "" {
			t.Errorf("%s pid %d: no CUDA_VISIBLE_DEVICES: amdrun's device choice did not reach it", r.Node, r.PID)
		}
	}
	if a.Rank+b.Rank != 1 || a.Rank == b.Rank {
		t.Errorf("ranks %d and %d, want 0 and 1", a.Rank, b.Rank)
	}
}

// TestNetnsC10dTwoNodesThroughAgent: a torchrun line for two nodes with
// a c10d rendezvous, unchanged, run by one amdrun on each of two
// network-namespace hosts; each hands its node to torch's agent, and
// the two ranks all-reduce across the veth pair.
func TestNetnsC10dTwoNodesThroughAgent(t *testing.T) {
	n, sys, script, out, envs := agentSetup(t)
	line := agentLine(n, "2", fmt.Sprintf("c10d-%d", os.Getpid()), freePort(t), script, out, "once")
	a := startNode(t, n[0], "node 0", sys, envs[0], line...)
	b := startNode(t, n[1], "node 1", sys, envs[1], line...)
	a.wait(t)
	b.wait(t)
	reps := agentReports(t, out)
	if len(reps["n0"]) != 1 || len(reps["n1"]) != 1 {
		t.Fatalf("reports %v, want one worker on each node", reps)
	}
	checkGroup(t, n, reps["n0"][0], reps["n1"][0])
	for _, r := range []agentReport{reps["n0"][0], reps["n1"][0]} {
		if r.RestartCount != "0" {
			t.Errorf("%s: TORCHELASTIC_RESTART_COUNT %q, want 0", r.Node, r.RestartCount)
		}
	}
}

// TestNetnsElasticLateNodeJoins: --nnodes 1:2 with a one-second last
// call. Node 0 starts alone (min 1) and its worker runs in a world of 1;
// node 1 starts only then, and its arrival makes node 0's agent restart
// its workers into a new rendezvous of both (torch 1.13's
// SimpleElasticAgent._invoke_run: num_nodes_waiting > 0 on a healthy
// group; "membership changes do not count as retries", so
// TORCHELASTIC_RESTART_COUNT stays 0).
func TestNetnsElasticLateNodeJoins(t *testing.T) {
	n, sys, script, out, envs := agentSetup(t)
	line := agentLine(n, "1:2", fmt.Sprintf("late-%d", os.Getpid()), freePort(t),
		"--rdzv-conf", "last_call_timeout=1,join_timeout=200", "--max-restarts", "0", script, out, "late")
	a := startNode(t, n[0], "node 0", sys, envs[0], line...)
	alone := waitReport(t, out, "n0", func(r agentReport) bool { return true }, a)
	if alone.WorldSize != 1 || alone.Sum != 1 {
		t.Fatalf("node 0 alone: world %d sum %v, want 1 and 1 (min 1 lets the first node start alone)", alone.WorldSize, alone.Sum)
	}
	b := startNode(t, n[1], "node 1", sys, envs[1], line...)
	a.wait(t)
	b.wait(t)
	reps := agentReports(t, out)
	if len(reps["n0"]) != 2 || len(reps["n1"]) != 1 {
		t.Fatalf("reports %+v, want node 0's world of 1 then one worker on each node in a world of 2", reps)
	}
	if reps["n0"][0].PID != alone.PID {
		t.Errorf("node 0's first worker is pid %d, the lone one was %d", reps["n0"][0].PID, alone.PID)
	}
	checkGroup(t, n, reps["n0"][1], reps["n1"][0])
	for _, r := range []agentReport{reps["n0"][1], reps["n1"][0]} {
		if r.RestartCount != "0" {
			t.Errorf("%s: TORCHELASTIC_RESTART_COUNT %q, want 0 (a node joining is no retry)", r.Node, r.RestartCount)
		}
	}
}

// TestNetnsWorkerKilledGroupRestarts: --max-restarts 1; once both
// workers have all-reduced, node 1's worker is killed (SIGKILL to the
// pid it reported, found in its PID namespace). Node 1's agent spends its one restart and
// re-rendezvouses; node 0's agent, its group healthy, sees the waiting
// node and restarts its worker too (no retry spent there). The second
// group all-reduces and both amdruns exit 0; node 1's second worker sees
// TORCHELASTIC_RESTART_COUNT=1, node 0's 0.
func TestNetnsWorkerKilledGroupRestarts(t *testing.T) {
	n, sys, script, out, envs := agentSetup(t)
	line := agentLine(n, "2", fmt.Sprintf("kill-%d", os.Getpid()), freePort(t),
		"--rdzv-conf", "join_timeout=200", "--max-restarts", "1", script, out, "kill")
	a := startNode(t, n[0], "node 0", sys, envs[0], line...)
	b := startNode(t, n[1], "node 1", sys, envs[1], line...)
	anyReport := func(agentReport) bool { return true }
	waitReport(t, out, "n0", anyReport, a, b)
	victim := waitReport(t, out, "n1", anyReport, a, b)
	hostPID := hostPIDOf(t, victim)
	if err := syscall.Kill(hostPID, syscall.SIGKILL); err != nil {
		t.Fatalf("kill node 1's worker %d: %v", hostPID, err)
	}
	a.wait(t)
	b.wait(t)
	reps := agentReports(t, out)
	if len(reps["n0"]) != 2 || len(reps["n1"]) != 2 {
		t.Fatalf("reports %+v, want two attempts on each node", reps)
	}
	checkGroup(t, n, reps["n0"][0], reps["n1"][0])
	checkGroup(t, n, reps["n0"][1], reps["n1"][1])
	if reps["n1"][0].PID != victim.PID {
		t.Errorf("node 1's first worker is pid %d, the killed one %d", reps["n1"][0].PID, victim.PID)
	}
	for _, c := range []struct {
		r    agentReport
		want string
	}{{reps["n0"][0], "0"}, {reps["n1"][0], "0"}, {reps["n1"][1], "1"}, {reps["n0"][1], "0"}} {
		if c.r.RestartCount != c.want {
			t.Errorf("%s pid %d: TORCHELASTIC_RESTART_COUNT %q, want %s", c.r.Node, c.r.PID, c.r.RestartCount, c.want)
		}
	}
}
