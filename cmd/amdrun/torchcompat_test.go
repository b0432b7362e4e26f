package main_test

// amdrun as a drop-in for torchrun (issue 15): torchrun's flags in both
// spellings and from PET_* variables, CPU ranks on a machine without a
// GPU, one process with several devices, and --launcher torchrun with
// the torchrun of Debian's torch 1.13.

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/amdrun/amdrun/internal/testutil"
)

// gloo job's report per rank, as examples/allreduce_check.py writes it.
type compatReport struct {
	Rank           int     `json:"rank"`
	WorldSize      int     `json:"world_size"`
	Sum            float64 `json:"sum"`
	ExpectedSum    float64 `json:"expected_sum"`
	LocalRank      int     `json:"local_rank"`
	LocalWorldSize string  `json:"local_world_size"`
	CUDAVisible    *string `json:"cuda_visible_devices"`
	RoleName       string  `json:"role_name"`
	RunID          string  `json:"run_id"`
	MasterPort     string  `json:"master_port"`
	TorchAsync     *string `json:"torch_nccl_async_error_handling"`
	Async          *string `json:"nccl_async_error_handling"`
	OMPThreads     string  `json:"omp_num_threads"`
}

// readReports reads the n rank reports written to dir, in rank order,
// and checks each rank's all-reduce.
func readReports(t *testing.T, dir string, n int, r result) []compatReport {
	t.Helper()
	var out []compatReport
	for rank := 0; rank < n; rank++ {
		b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("rank%d.json", rank)))
		if err != nil {
			t.Fatalf("rank %d wrote no report: %v\nstdout:\n%s\nstderr:\n%s", rank, err, r.stdout, r.stderr)
		}
		var rr compatReport
		if err := json.Unmarshal(b, &rr); err != nil {
			t.Fatal(err)
		}
		if rr.WorldSize != n || rr.Sum != rr.ExpectedSum {
			t.Errorf("rank %d: world %d, sum %v; want %d and %v", rank, rr.WorldSize, rr.Sum, n, rr.ExpectedSum)
		}
		out = append(out, rr)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Rank < out[j].Rank })
	return out
}

// freePort is a TCP port no one listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func checkScript(t *testing.T) string {
	t.Helper()
	script, err := filepath.Abs("../../examples/allreduce_check.py")
	if err != nil {
		t.Fatal(err)
	}
	return script
}

// TestTorchrunSpellingsRunGloo runs a real gloo job with torchrun's flags
// written as torch 2.x writes them, as torch 1.13 writes them, and given
// through PET_* variables; each rank must get what the flags said.
func TestTorchrunSpellingsRunGloo(t *testing.T) {
	testutil.EndToEnd(t)
	py := needTorch(t)
	script := checkScript(t)
	for _, spelling := range []string{"hyphen", "underscore", "PET"} {
		t.Run(spelling, func(t *testing.T) {
			out := t.TempDir()
			port := freePort(t)
			flags := [][2]string{
				{"nproc-per-node", "2"}, {"master-port", fmt.Sprint(port)}, {"max-restarts", "0"},
				{"rdzv-id", "job-" + spelling}, {"role", "trainer"}, {"monitor-interval", "1"},
				{"start-method", "spawn"}, {"rdzv-backend", "static"},
			}
			env := cleanEnv(t)
			var args []string
			for _, f := range flags {
				switch spelling {
				case "hyphen":
					args = append(args, "--"+f[0], f[1])
				case "underscore":
					args = append(args, "--"+strings.ReplaceAll(f[0], "-", "_"), f[1])
				case "PET":
					env = append(env, "PET_"+strings.ToUpper(strings.ReplaceAll(f[0], "-", "_"))+"="+f[1])
				}
			}
			args = append(append([]string{"--source", "example", "--python", py}, args...), script, out)
			r := runAmdrun(t, env, args...)
			if r.code != 0 {
				t.Fatalf("amdrun %q: exit %d\n%s", args, r.code, r.stderr)
			}
			for i, rr := range readReports(t, out, 2, r) {
				if rr.LocalRank != i || rr.LocalWorldSize != "2" || rr.RoleName != "trainer" || rr.RunID != "job-"+spelling ||
					rr.MasterPort != fmt.Sprint(port) {
					t.Errorf("rank %d: LOCAL_RANK %d LOCAL_WORLD_SIZE %s ROLE_NAME %q TORCHELASTIC_RUN_ID %q MASTER_PORT %s; want %d, 2, trainer, job-%s, %d",
						i, rr.LocalRank, rr.LocalWorldSize, rr.RoleName, rr.RunID, rr.MasterPort, i, spelling, port)
				}
				if rr.TorchAsync == nil || *rr.TorchAsync != "1" || rr.Async == nil || *rr.Async != "1" {
					t.Errorf("rank %d: TORCH_NCCL_ASYNC_ERROR_HANDLING %v NCCL_ASYNC_ERROR_HANDLING %v, want both 1 (torch 1.13 reads the second)", i, rr.TorchAsync, rr.Async)
				}
			}
		})
	}
	// A flag on the command line wins over its PET_* variable.
	out := t.TempDir()
	r := runAmdrun(t, cleanEnv(t, "PET_NPROC_PER_NODE=3", "PET_ROLE=env"), "--source", "example", "--python", py,
		"--nproc_per_node", "2", script, out)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	if reps := readReports(t, out, 2, r); reps[0].RoleName != "env" {
		t.Errorf("ROLE_NAME %q, want PET_ROLE's env", reps[0].RoleName)
	}
	if _, err := os.Stat(filepath.Join(out, "rank2.json")); err == nil {
		t.Errorf("3 ranks ran: PET_NPROC_PER_NODE=3 won over --nproc_per_node 2")
	}
}

// TestCPURanksWithoutGPU runs a real gloo job, no --dry-run, on a machine
// without a GPU (no KFD tree, no vendor tool on PATH): CPU ranks with the
// torchrun environment, one line saying no GPU was found where GPUs were
// asked for (none for a count of ranks); ps says the same
// and exits 0.
func TestCPURanksWithoutGPU(t *testing.T) {
	testutil.EndToEnd(t)
	py := needTorch(t)
	script := checkScript(t)
	noGPU := t.TempDir() // an empty sysfs: no KFD topology
	env := toolEnv(t, systemPath())
	for _, tc := range []struct {
		name  string
		args  []string
		ranks int
		line  string
	}{
		{"no GPU found, --ngpus 3", []string{"--sysfs-root", noGPU, "--ngpus", "3"}, 3, "amdrun: warning: no GPU found on this machine: running 3 CPU rank(s)"},
		// A count of ranks, not of GPUs: CPU ranks without a word (issue 31).
		{"no GPU found, --nproc-per-node 3", []string{"--sysfs-root", noGPU, "--nproc-per-node", "3"}, 3, ""},
		{"--ngpus 0 on a node with GPUs", []string{"--source", "example", "--ngpus", "0", "--nproc-per-node", "2"}, 2, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := t.TempDir()
			args := append(append(tc.args, "--python", py), script, out)
			r := runAmdrun(t, env, args...)
			if r.code != 0 {
				t.Fatalf("amdrun %q: exit %d\n%s", args, r.code, r.stderr)
			}
			if tc.line != "" && (!strings.HasPrefix(r.stderr, tc.line) || strings.Count(r.stderr, "no GPU") != 1) || tc.line == "" && strings.Contains(r.stderr, "no GPU") {
				t.Errorf("stderr %q: want one line starting %q", r.stderr, tc.line)
			}
			for i, rr := range readReports(t, out, tc.ranks, r) {
				if rr.CUDAVisible != nil || rr.LocalRank != i {
					t.Errorf("rank %d: CUDA_VISIBLE_DEVICES %v LOCAL_RANK %d; want unset and %d", i, rr.CUDAVisible, rr.LocalRank, i)
				}
			}
		})
	}
	r := runAmdrun(t, env, "--sysfs-root", noGPU, "ps")
	if r.code != 0 || strings.Count(r.stdout, "\n") != 1 || !strings.HasPrefix(r.stdout, "no GPU found") || r.stderr != "" {
		t.Errorf("ps without a GPU: exit %d, stdout %q, stderr %q; want 0 and one line saying no GPU", r.code, r.stdout, r.stderr)
	}
	r = runAmdrun(t, env, "--sysfs-root", noGPU, "topo")
	if r.code != 1 || strings.Count(r.stderr, "\n") != 1 || !strings.HasPrefix(r.stderr, "amdrun: no GPU found") {
		t.Errorf("topo without a GPU: exit %d, stderr %q; want one line saying no GPU", r.code, r.stderr)
	}
}

// TestOneProcessFourDevices: --ngpus 4 --nproc-per-node 1 on the bundled
// example starts one process that sees the 4 best-connected devices and
// holds their lease while it runs (the process itself runs amdrun ps).
func TestOneProcessFourDevices(t *testing.T) {
	testutil.EndToEnd(t)
	env := cleanEnv(t, "OMP_NUM_THREADS=1")
	r := runAmdrun(t, env, "--source", "example", "--ngpus", "4", "--nproc-per-node", "1", "--no-python", "sh", "-c",
		`echo "visible=$CUDA_VISIBLE_DEVICES/$HIP_VISIBLE_DEVICES world=$WORLD_SIZE rank=$RANK"; "$0" --source example ps`, amdrunBin)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) == 0 || lines[0] != "visible=0,1,6,7/0,1,6,7 world=1 rank=0" {
		t.Fatalf("first line %q, want one process seeing 0,1,6,7", lines[0])
	}
	if strings.Contains(r.stdout, "[rank") {
		t.Errorf("one process, yet output is prefixed:\n%s", r.stdout)
	}
	leased := map[string]bool{}
	for _, l := range lines[2:] { // after the echo and ps's header
		f := strings.Split(l, "\t")
		if len(f) == 5 && f[3] == "leased" {
			leased[f[0]] = true
		}
	}
	if len(leased) != 4 || !leased["0"] || !leased["1"] || !leased["6"] || !leased["7"] {
		t.Errorf("while the process ran, leased devices %v; want 0,1,6,7:\n%s", leased, r.stdout)
	}
}

// TestLauncherTorchrunOfTorch113 runs --launcher torchrun with the
// torchrun of Debian's torch 1.13, which takes only underscore spellings:
// every flag amdrun passes must be accepted, and the gloo job must run.
func TestLauncherTorchrunOfTorch113(t *testing.T) {
	testutil.EndToEnd(t)
	py := needTorch(t)
	script := checkScript(t)
	bin := t.TempDir()
	wrapper := fmt.Sprintf("#!/bin/sh\nexec %s -m torch.distributed.run \"$@\"\n", py)
	if err := os.WriteFile(filepath.Join(bin, "torchrun"), []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	env := setEnv(cleanEnv(t, "OMP_NUM_THREADS=1"), "PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, logs := t.TempDir(), t.TempDir()
	args := []string{"--source", "example", "--launcher", "torchrun", "--ngpus", "2",
		"--rdzv-backend", "c10d", "--rdzv-endpoint", fmt.Sprintf("127.0.0.1:%d", freePort(t)), "--rdzv-id", "j113",
		"--max-restarts", "1", "--role", "trainer", "--monitor-interval", "0.5", "--start-method", "spawn",
		// Per-rank one-stream values, not torchrun's defaults "0": torch
		// 1.13's Std.from_str maps 0 and 3 to None under Python 3.11
		// (iterating an IntFlag skips the zero and combined members), so
		// Debian's torchrun fails without -r and -t of this form.
		"--log-dir", logs, "--redirects", "0:2,1:2", "--tee", "0:1,1:1", script, out}
	r := runAmdrun(t, env, args...)
	if r.code != 0 {
		t.Fatalf("amdrun %q: exit %d\n%s", args, r.code, r.stderr)
	}
	for i, rr := range readReports(t, out, 2, r) {
		if rr.RoleName != "trainer" || rr.CUDAVisible == nil || *rr.CUDAVisible != "0,1" || rr.LocalRank != i {
			t.Errorf("rank %d: ROLE_NAME %q CUDA_VISIBLE_DEVICES %v LOCAL_RANK %d; want trainer, 0,1, %d", i, rr.RoleName, rr.CUDAVisible, rr.LocalRank, i)
		}
	}
	for _, name := range []string{"stdout.log", "stderr.log"} {
		files, _ := filepath.Glob(filepath.Join(logs, "j113*", "attempt_0", "*", name))
		if len(files) != 2 {
			t.Errorf("torchrun's --log_dir -r -t files %v, want one %s per rank", files, name)
		}
	}
}

// TestLauncherTorchrunArgvParsesInTorch113 hands the torchrun command
// lines --launcher torchrun builds (as --dry-run shows them) to the
// argument parser of Debian's torch 1.13, which knows only underscore
// spellings: each must parse.
func TestLauncherTorchrunArgvParsesInTorch113(t *testing.T) {
	testutil.EndToEnd(t)
	py := needTorch(t)
	env := cleanEnv(t, "OMP_NUM_THREADS=1")
	for _, args := range [][]string{
		{"-n", "2", "train.py", "--lr", "1"},
		{"-n", "2", "--nnodes", "2", "--node-rank", "1", "--master-addr", "n0", "--master-port", "29400", "--no-python", "./a.out"},
		{"-n", "1", "--nnodes", "1:2", "--rdzv-backend", "c10d", "--rdzv-endpoint", "n0:29400", "--rdzv-id", "j", "--rdzv-conf", "timeout=5",
			"--max-restarts", "2", "--role", "r", "--monitor-interval", "1", "--start-method", "fork", "--log-dir", "/tmp/l",
			"-r", "0:1", "-t", "0:2", "-m", "pkg.mod"},
		{"-n", "1", "--run-path", "/abs/train.py"},
	} {
		r := runAmdrun(t, env, append([]string{"--source", "example", "--launcher", "torchrun", "--dry-run"}, args...)...)
		if r.code != 0 {
			t.Fatalf("%q: exit %d\n%s", args, r.code, r.stderr)
		}
		line, _, _ := strings.Cut(r.stdout, "\n")
		argv, ok := strings.CutPrefix(line, "Launcher: torchrun ")
		if !ok {
			t.Fatalf("%q: first line %q, want the torchrun command", args, line)
		}
		check := exec.Command(py, append([]string{"-c",
			"import sys; from torch.distributed.run import get_args_parser; get_args_parser().parse_args(sys.argv[1:])"},
			strings.Fields(argv)...)...)
		if out, err := check.CombinedOutput(); err != nil {
			t.Errorf("torch 1.13 rejects torchrun %s: %v\n%s", argv, err, out)
		}
	}
}

// TestHelpExamplesRun: every example of `amdrun --help` is a command
// amdrun accepts (planned with --dry-run on the bundled example), and
// every script of this repository it names exists.
func TestHelpExamplesRun(t *testing.T) {
	testutil.EndToEnd(t)
	h := runAmdrun(t, cleanEnv(t), "--help")
	_, ex, ok := strings.Cut(h.stdout, "Examples:\n")
	if !ok {
		t.Fatalf("--help has no Examples:\n%s", h.stdout)
	}
	ex, _, _ = strings.Cut(ex, "\n\n")
	n := 0
	for _, line := range strings.Split(ex, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "amdrun" {
			t.Errorf("example %q does not start with amdrun", line)
			continue
		}
		n++
		for _, a := range f {
			if strings.HasPrefix(a, "examples/") || strings.HasPrefix(a, "bench/") {
				if _, err := os.Stat(filepath.Join("../..", a)); err != nil {
					t.Errorf("example %q names %s: %v", line, a, err)
				}
			}
			if strings.Contains(a, "run_test") {
				t.Errorf("example %q names a module that does not exist", line)
			}
		}
		args := f[1:]
		if !strings.Contains(line, "--topology") {
			args = append([]string{"--source", "example"}, args...)
		} else {
			args = append([]string{"--topology", writeTopology(t, func(map[string]any) {})}, args[2:]...)
		}
		if !strings.Contains(line, "--dry-run") {
			args = append([]string{"--dry-run"}, args...)
		}
		if r := runAmdrun(t, cleanEnv(t), args...); r.code != 0 {
			t.Errorf("example %q: amdrun %q exits %d: %s", line, args, r.code, r.stderr)
		}
	}
	if n < 3 {
		t.Errorf("%d examples, want several:\n%s", n, ex)
	}
}

// TestNoPythonOldTorchAsyncName: under --no-python the torch of the
// interpreter amdrun would otherwise run decides, as torchrun's own does:
// before 2.2 the ranks get NCCL_ASYNC_ERROR_HANDLING too (issue 33).
func TestNoPythonOldTorchAsyncName(t *testing.T) {
	testutil.EndToEnd(t)
	py := filepath.Join(t.TempDir(), "python3")
	for _, c := range []struct{ version, want string }{{"1.13.1", "1"}, {"2.11.0", ""}} {
		if err := os.WriteFile(py, []byte("#!/bin/sh\necho "+c.version+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		p := dryRun(t, cleanEnv(t, "PYTHON_EXEC="+py), "--source", "example", "--ngpus", "1", "--no-python", "env")
		if env := p.Ranks[0].Env; env["TORCH_NCCL_ASYNC_ERROR_HANDLING"] != "1" || env["NCCL_ASYNC_ERROR_HANDLING"] != c.want {
			t.Errorf("--no-python, torch %s: TORCH_NCCL_ASYNC_ERROR_HANDLING=%q NCCL_ASYNC_ERROR_HANDLING=%q, want 1 and %q",
				c.version, env["TORCH_NCCL_ASYNC_ERROR_HANDLING"], env["NCCL_ASYNC_ERROR_HANDLING"], c.want)
		}
	}
}
