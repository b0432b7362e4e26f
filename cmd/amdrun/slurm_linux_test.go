package main_test

// TestRealSlurm runs amdrun under Debian's real Slurm: a slurmctld and
// two slurmd on this machine, each slurmd in its own network namespace
// with its own host name (node1, node2), 4 fake GPUs per node in
// gres.conf, and the batch script of docs/multinode.md submitted with sbatch.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/amdrun/amdrun/internal/testutil"
	"github.com/amdrun/amdrun/internal/topology"
	"golang.org/x/sys/unix"
)

// The test binary re-executed as a cluster node's process: it takes the
// host name and /etc/hosts of the node, then becomes the daemon. It runs
// under "ip netns exec" (network namespace and a private mount
// namespace) in a UTS namespace of its own.
const (
	envNodeHost  = "AMDRUN_E2E_NODE_HOST"
	envNodeHosts = "AMDRUN_E2E_NODE_HOSTS"
	// envNodeLeases is a lease directory made node-local: the node
	// mounts DIR-HOST on DIR, as /run/lock is local to each real node.
	envNodeLeases = "AMDRUN_E2E_NODE_LEASES"
)

func init() {
	roles = append(roles, testutil.Role{Env: envNodeHost, Run: func(host string, argv []string) int {
		err := becomeNode(host, os.Getenv(envNodeHosts), os.Getenv(envNodeLeases), argv)
		fmt.Fprintf(os.Stderr, "node %s: %v\n", host, err)
		return 1
	}})
}

func becomeNode(host, hosts, leases string, argv []string) error {
	if len(argv) == 0 {
		return errors.New("no command")
	}
	if err := unix.Sethostname([]byte(host)); err != nil {
		return fmt.Errorf("sethostname: %w", err)
	}
	// Job processes resolve the node names (gloo connects to
	// MASTER_ADDR=node1) through the node's own /etc/hosts.
	if err := unix.Mount(hosts, "/etc/hosts", "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind %s on /etc/hosts: %w", hosts, err)
	}
	if err := unix.Mount(leases+"-"+host, leases, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind %s-%s on %s: %w", leases, host, leases, err)
	}
	var env []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k != envNodeHost && k != envNodeHosts && k != envNodeLeases {
			env = append(env, kv)
		}
	}
	return syscall.Exec(argv[0], argv, env)
}

// needSlurm skips (or, with AMDRUN_REQUIRE_SLURM=1 as in CI, fails) when
// this machine cannot run a private Slurm cluster.
func needSlurm(t *testing.T) map[string]string {
	t.Helper()
	fail := t.Skipf
	if os.Getenv("AMDRUN_REQUIRE_SLURM") == "1" {
		fail = t.Fatalf
	}
	if os.Geteuid() != 0 {
		fail("skipping: a private Slurm cluster in network namespaces needs root")
	}
	if runtime.NumCPU() < 2 {
		fail("skipping: two jobs of one CPU per node need 2 CPUs, have %d", runtime.NumCPU())
	}
	bins := map[string]string{}
	for _, b := range []string{"slurmctld", "slurmd", "sbatch", "srun", "scontrol", "squeue", "scancel", "sinfo", "ip"} {
		p, err := exec.LookPath(b)
		if err != nil {
			for _, dir := range []string{"/usr/sbin", "/sbin"} {
				if _, serr := os.Stat(filepath.Join(dir, b)); serr == nil {
					p, err = filepath.Join(dir, b), nil
				}
			}
		}
		if err != nil {
			fail("skipping: no %s (apt-get install slurmctld slurmd slurm-client iproute2)", b)
		}
		bins[b] = p
	}
	return bins
}

// cluster is a private two-node Slurm cluster.
type cluster struct {
	t    *testing.T
	dir  string
	bins map[string]string
	ns   [2]string
	env  []string // for client commands: SLURM_CONF, PATH, ...
	logs []string
}

// slurmConf is the whole configuration: auth/none (Debian's 22.05 build
// has auth_none.so and cred_none.so, so no munge), no cgroups
// (proctrack/pgid, task/affinity binds each task to its CPUs), one
// partition of both nodes with 4 GPUs each.
const slurmConf = `ClusterName=amdrun
SlurmctldHost=node1(%[2]s)
AuthType=auth/none
CredType=cred/none
SlurmUser=root
SlurmdUser=root
StateSaveLocation=%[1]s/ctld
SlurmdSpoolDir=%[1]s/spool/%%n
SlurmctldPidFile=%[1]s/slurmctld.pid
SlurmdPidFile=%[1]s/spool/slurmd-%%n.pid
SlurmctldLogFile=%[1]s/slurmctld.log
SlurmdLogFile=%[1]s/slurmd-%%n.log
ProctrackType=proctrack/pgid
TaskPlugin=task/affinity
SwitchType=switch/none
MpiDefault=none
MailProg=/bin/true
ReturnToService=2
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SlurmdParameters=config_overrides
# sbatch --wait polls every 2 s while this is under 4 s (sbatch.c).
MinJobAge=4
NodeName=node1 NodeAddr=%[2]s CPUs=%[4]d Gres=gpu:mi210:4 State=UNKNOWN
NodeName=node2 NodeAddr=%[3]s CPUs=%[4]d Gres=gpu:mi210:4 State=UNKNOWN
PartitionName=amdrun Nodes=node[1-2] Default=YES MaxTime=INFINITE State=UP
`

// startCluster writes the configuration, makes the namespaces and starts
// the daemons; t.Cleanup stops everything, also on failure.
func startCluster(t *testing.T, bins map[string]string) *cluster {
	t.Helper()
	c := &cluster{t: t, dir: t.TempDir(), bins: bins}
	tag := fmt.Sprint(os.Getpid() % 100000)
	c.ns = [2]string{"amdslurm0-" + tag, "amdslurm1-" + tag}
	veth := []string{"asv0-" + tag, "asv1-" + tag}
	addr := []string{"10.202.0.1", "10.202.0.2"}

	for _, d := range []string{"ctld", "spool/node1", "spool/node2", "dev", "leases", "leases-node1", "leases-node2"} {
		if err := os.MkdirAll(filepath.Join(c.dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// Fake GPUs: character devices Slurm's gres/gpu plugin accepts as
	// File= entries (it only stats them without cgroups).
	for i := 0; i < 4; i++ {
		p := filepath.Join(c.dir, "dev", fmt.Sprintf("gpu%d", i))
		if err := unix.Mknod(p, unix.S_IFCHR|0o600, int(unix.Mkdev(511, uint32(i)))); err != nil {
			t.Fatalf("mknod %s: %v", p, err)
		}
	}
	write := func(name, text string) string {
		p := filepath.Join(c.dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	conf := write("slurm.conf", fmt.Sprintf(slurmConf, c.dir, addr[0], addr[1], runtime.NumCPU()))
	// Slurm 22.05 always loads a cgroup plugin in slurmd; "autodetect"
	// fails on some hosts (hybrid mounts, gVisor). cgroup/v1's init
	// touches nothing, and nothing here uses cgroups.
	write("cgroup.conf", "CgroupPlugin=cgroup/v1\n")
	write("gres.conf", fmt.Sprintf("NodeName=node[1-2] Name=gpu Type=mi210 File=%s/dev/gpu[0-3]\n", c.dir))
	hosts := write("hosts", fmt.Sprintf("127.0.0.1 localhost\n%s node1\n%s node2\n", addr[0], addr[1]))

	if out, err := exec.Command("ip", "netns", "add", c.ns[0]).CombinedOutput(); err != nil {
		t.Fatalf("cannot make network namespaces here: %v %s", err, out)
	}
	t.Cleanup(func() {
		for _, ns := range c.ns {
			c.killNamespace(ns)
			exec.Command("ip", "netns", "del", ns).Run()
		}
	})
	ip(t, "netns", "add", c.ns[1])
	ip(t, "link", "add", veth[0], "type", "veth", "peer", "name", veth[1])
	for i := 0; i < 2; i++ {
		ip(t, "link", "set", veth[i], "netns", c.ns[i])
		ip(t, "-n", c.ns[i], "addr", "add", addr[i]+"/24", "dev", veth[i])
		ip(t, "-n", c.ns[i], "link", "set", veth[i], "up")
		ip(t, "-n", c.ns[i], "link", "set", "lo", "up")
	}

	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SLURM_") {
			c.env = append(c.env, kv)
		}
	}
	c.env = append(c.env, "SLURM_CONF="+conf)
	c.logs = []string{filepath.Join(c.dir, "slurmctld.log"), filepath.Join(c.dir, "slurmd-node1.log"), filepath.Join(c.dir, "slurmd-node2.log")}
	t.Cleanup(func() {
		if t.Failed() {
			for _, l := range c.logs {
				t.Logf("%s:\n%s", l, tail(l, 30))
			}
		}
	})
	c.daemon(0, "node1", hosts, bins["slurmctld"], "-D", "-f", conf)
	c.daemon(0, "node1", hosts, bins["slurmd"], "-D", "-N", "node1", "-f", conf)
	c.daemon(1, "node2", hosts, bins["slurmd"], "-D", "-N", "node2", "-f", conf)
	c.waitIdle(30 * time.Second)
	return c
}

// daemon starts argv as node host in namespace ns[i] and stops it when
// the test ends.
func (c *cluster) daemon(i int, host, hosts string, argv ...string) {
	c.t.Helper()
	self, err := os.Executable()
	if err != nil {
		c.t.Fatal(err)
	}
	out := filepath.Join(c.dir, filepath.Base(argv[0])+"-"+host+".out")
	f, err := os.Create(out)
	if err != nil {
		c.t.Fatal(err)
	}
	cmd := exec.Command("ip", append([]string{"netns", "exec", c.ns[i], self}, argv...)...)
	cmd.Env = append(slices.Clone(c.env), envNodeHost+"="+host, envNodeHosts+"="+hosts,
		envNodeLeases+"="+filepath.Join(c.dir, "leases"))
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUTS}
	if err := cmd.Start(); err != nil {
		c.t.Fatalf("start %v: %v", argv, err)
	}
	c.logs = append(c.logs, out)
	c.t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		f.Close()
	})
}

// killNamespace kills what is left in network namespace ns: slurmstepd
// and job processes outlive slurmd when a test fails mid-job. Every such
// process belongs to this test, which made the namespace.
func (c *cluster) killNamespace(ns string) {
	out, _ := exec.Command("ip", "netns", "pids", ns).Output()
	for _, f := range strings.Fields(string(out)) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// client runs a Slurm client command inside the first node's namespace,
// where slurmctld listens.
func (c *cluster) client(ctx context.Context, dir string, env []string, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", c.ns[0], c.bins[name]}, args...)...)
	cmd.Dir = dir
	cmd.Env = env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if err != nil {
		return out.String(), fmt.Errorf("%s %s: %w\n%s%s", name, strings.Join(args, " "), err, out.String(), errb.String())
	}
	return out.String(), nil
}

func (c *cluster) waitIdle(limit time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(limit)
	var last string
	for time.Now().Before(deadline) {
		out, err := c.client(context.Background(), c.dir, c.env, "sinfo", "-h", "-N", "-o", "%N %t")
		last = fmt.Sprint(out, err)
		if err == nil && strings.Count(out, " idle") == 2 {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	c.t.Fatalf("nodes not idle after %s: %s", limit, last)
}

// waitFile waits for path to exist.
func (c *cluster) waitFile(path string, limit time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(path); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.t.Fatalf("%s did not appear within %s", path, limit)
}

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// readEnvFile reads KEY=VALUE lines.
func readEnvFile(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m := map[string]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			m[k] = v
		}
	}
	return m
}

// cpusOfMask turns Slurm's hex CPU mask ("0x6") into the kernel's CPU
// list ("1-2").
func cpusOfMask(t *testing.T, mask string) string {
	t.Helper()
	n, ok := new(big.Int).SetString(strings.TrimPrefix(mask, "0x"), 16)
	if !ok {
		t.Fatalf("CPU mask %q", mask)
	}
	var cpus []int
	for i := 0; i < n.BitLen(); i++ {
		if n.Bit(i) == 1 {
			cpus = append(cpus, i)
		}
	}
	return topology.FormatCPUList(cpus)
}

type slurmRank struct {
	rankReport
	ROCRVisible string `json:"rocr_visible_devices"`
	Hostname    string `json:"hostname"`
	MasterAddr  string `json:"master_addr"`
	MasterPort  string `json:"master_port"`
	CPUBindList string `json:"slurm_cpu_bind_list"`
}

// TestRealSlurmTwoNodeGlooAllReduce submits the batch script docs/multinode.md shows,
// examples/slurm/allreduce.sbatch, with "sbatch --wait" to a real
// two-node Slurm cluster while another job holds GPUs 0 and 1 of both
// nodes. srun starts amdrun once per node; the 4 ranks all-reduce with
// gloo across the namespaces. Checked: the sum; ranks 0-1 on node1 and
// 2-3 on node2; master node1 (the first host of the allocation) and the
// port derived from the job id, with no amdrun flag but the script;
// Slurm's GPUs 2,3 become HIP/CUDA positions 0,1 under ROCR 2,3; every
// rank stays on the CPUs srun bound its task to; amdrun expanded the
// node list with scontrol, and with its own parser where scontrol is not
// on PATH; what a real step sets.
func TestRealSlurmTwoNodeGlooAllReduce(t *testing.T) {
	testutil.EndToEnd(t)
	bins := needSlurm(t)
	py := needTorch(t)
	start := time.Now()
	c := startCluster(t, bins)
	t.Logf("cluster up in %s", time.Since(start).Round(time.Millisecond))

	root := testutil.RepoRoot(t)
	script := filepath.Join(root, "examples", "slurm", "allreduce.sbatch")

	// The nodes' GPUs: the MI210 KFD tree (8 GPUs; Slurm hands out 4).
	sysfs := testutil.KFD(t, "topo-mi210-xgmi-pcie")
	amdrunDir := filepath.Dir(amdrunBin)
	// scontrol, logged: proves amdrun asked it for the node list.
	wrap := t.TempDir()
	scontrolLog := filepath.Join(c.dir, "scontrol.log")
	wrapper := fmt.Sprintf("#!/bin/sh\necho \"$*\" >> %s\nexec %s \"$@\"\n", scontrolLog, bins["scontrol"])
	if err := os.WriteFile(filepath.Join(wrap, "scontrol"), []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	env := append(slices.Clone(c.env),
		"PATH="+wrap+string(os.PathListSeparator)+amdrunDir+string(os.PathListSeparator)+os.Getenv("PATH"),
		"PYTHON_EXEC="+py, "AMDRUN_SYSFS_ROOT="+sysfs, "AMDRUN_LEASE_DIR="+filepath.Join(c.dir, "leases"))
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Second)
	defer cancel()

	holdOut := filepath.Join(c.dir, "holder")
	if err := os.MkdirAll(holdOut, 0o755); err != nil {
		t.Fatal(err)
	}
	id, err := c.client(ctx, c.dir, env, "sbatch", "--parsable", "--nodes=2", "--ntasks-per-node=1", "--gpus-per-node=2",
		"--output="+filepath.Join(c.dir, "holder.out"), testutil.Testdata(t, "slurm", "holder.sbatch"), holdOut, amdrunDir)
	if err != nil {
		t.Fatal(err)
	}
	holderID := strings.TrimSpace(id)
	t.Cleanup(func() { c.client(context.Background(), c.dir, c.env, "scancel", holderID) })
	c.waitFile(filepath.Join(holdOut, "holding"), 60*time.Second)

	// What a real step sets, and what amdrun plans from it without
	// scontrol (PATH holds amdrun only).
	stepEnv := readEnvFile(t, filepath.Join(holdOut, "step-env.0"))
	for _, k := range []string{"SLURM_JOB_ID", "SLURM_STEP_ID", "SLURM_STEP_NODELIST", "SLURM_STEP_NUM_NODES",
		"SLURM_STEP_NUM_TASKS", "SLURM_NODEID", "SLURM_GPUS_PER_NODE", "SLURM_STEP_GPUS",
		"CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"} {
		if _, ok := stepEnv[k]; !ok {
			t.Errorf("a real step did not set %s", k)
		}
	}
	var names []string
	for k := range stepEnv {
		if strings.HasPrefix(k, "SLURM") || strings.HasSuffix(k, "VISIBLE_DEVICES") || k == "GPU_DEVICE_ORDINAL" || k == "ZE_AFFINITY_MASK" {
			names = append(names, k+"="+stepEnv[k])
		}
	}
	sort.Strings(names)
	t.Logf("a real step (node 0) set:\n%s", strings.Join(names, "\n"))
	holdPort := 20000 + atoi(t, holderID)%20000
	for node := 0; node < 2; node++ {
		b, err := os.ReadFile(filepath.Join(holdOut, fmt.Sprintf("dry.%d.json", node)))
		if err != nil {
			t.Fatal(err)
		}
		var p dryPlan
		if err := json.Unmarshal(b, &p); err != nil {
			t.Fatalf("node %d dry run: %v\n%s", node, err, b)
		}
		if len(p.Ranks) != 2 {
			t.Fatalf("node %d dry run: %d ranks, want 2\n%s", node, len(p.Ranks), b)
		}
		if p.Ranks[0].Rank != 2*node || p.Ranks[0].Env["MASTER_ADDR"] != "node1" ||
			p.Ranks[0].Env["MASTER_PORT"] != fmt.Sprint(holdPort) || p.Ranks[0].Env["WORLD_SIZE"] != "4" ||
			p.VisibleDevices != "0,1" {
			t.Errorf("node %d dry run without scontrol: %d ranks from %d, master %s:%s, world %s, visible %s; want 2 from %d, node1:%d, 4, 0,1",
				node, len(p.Ranks), p.Ranks[0].Rank, p.Ranks[0].Env["MASTER_ADDR"], p.Ranks[0].Env["MASTER_PORT"],
				p.Ranks[0].Env["WORLD_SIZE"], p.VisibleDevices, 2*node, holdPort)
		}
	}
	if _, err := os.Stat(scontrolLog); err == nil {
		t.Errorf("scontrol was called without being on PATH: %s", tail(scontrolLog, 5))
	}

	// The job under test, as docs/multinode.md shows it.
	out := filepath.Join(c.dir, "out")
	jobStart := time.Now()
	id, err = c.client(ctx, root, env, "sbatch", "--wait", "--parsable", "--output="+filepath.Join(c.dir, "job.out"), script, out)
	jobTime := time.Since(jobStart)
	if err != nil {
		t.Fatalf("%v\njob output:\n%s", err, tail(filepath.Join(c.dir, "job.out"), 40))
	}
	jobID := atoi(t, strings.TrimSpace(id))
	t.Logf("sbatch --wait of the job took %s; job output:\n%s", jobTime.Round(time.Millisecond), tail(filepath.Join(c.dir, "job.out"), 20))

	ranks := make([]slurmRank, 4)
	for rank := range ranks {
		b, err := os.ReadFile(filepath.Join(out, fmt.Sprintf("rank%d.json", rank)))
		if err != nil {
			t.Fatalf("rank %d wrote no report: %v", rank, err)
		}
		if err := json.Unmarshal(b, &ranks[rank]); err != nil {
			t.Fatal(err)
		}
	}
	for i, r := range ranks {
		host := []string{"node1", "node2"}[i/2]
		if r.Rank != i || r.WorldSize != 4 || r.Sum != 10 || r.LocalRank != i%2 || r.Hostname != host {
			t.Errorf("rank %d: rank %d world %d sum %v local %d on %s; want world 4, sum 10, local %d on %s",
				i, r.Rank, r.WorldSize, r.Sum, r.LocalRank, r.Hostname, i%2, host)
		}
		if r.MasterAddr != "node1" || r.MasterPort != fmt.Sprint(20000+jobID%20000) {
			t.Errorf("rank %d: master %s:%s, want node1:%d", i, r.MasterAddr, r.MasterPort, 20000+jobID%20000)
		}
		if r.ROCRVisible != "2,3" || r.HIPVisible != "0,1" || r.CUDAVisible != "0,1" {
			t.Errorf("rank %d: ROCR %q HIP %q CUDA %q; want Slurm's 2,3 and positions 0,1", i, r.ROCRVisible, r.HIPVisible, r.CUDAVisible)
		}
		if want := cpusOfMask(t, r.CPUBindList); r.CPUsAllowed != want {
			t.Errorf("rank %d: CPUs %s, want %s (srun's binding %s)", i, r.CPUsAllowed, want, r.CPUBindList)
		}
	}
	calls, _ := os.ReadFile(scontrolLog)
	if n := strings.Count(string(calls), "show hostnames node[1-2]\n"); n != 2 {
		t.Errorf("scontrol calls:\n%s\nwant 2 of show hostnames node[1-2] (one per node)", calls)
	}
	if d := time.Since(start); d > 2*time.Minute {
		t.Errorf("took %s, want under 2 minutes", d)
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return n
}
