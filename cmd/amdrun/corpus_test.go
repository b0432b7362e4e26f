package main_test

// The torchrun corpus (issue 23): real torchrun lines copied from the
// launch scripts and docs of training repositories
// (testdata/torchrun-corpus/lines.tsv, each with its source), run with
// the user's script replaced by a stand-in that reports its rank
// environment, under Debian's torchrun and under amdrun, and compared.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/amdrun/amdrun/internal/testutil"
)

// corpusLine is one entry of lines.tsv.
type corpusLine struct {
	id, kind, source, published, run, compare string
}

func readCorpus(t *testing.T) []corpusLine {
	t.Helper()
	f, err := os.Open(testutil.Testdata(t, "torchrun-corpus", "lines.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []corpusLine
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		c := strings.Split(line, "\t")
		if len(c) != 6 {
			t.Fatalf("lines.tsv: %d columns, want 6: %q", len(c), line)
		}
		out = append(out, corpusLine{c[0], c[1], c[2], c[3], c[4], c[5]})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// standin is the rank stand-in: it writes the variables torchrun defines
// for a worker, and its arguments, to $CORPUS_OUT/rank<RANK>.json, and
// prints one line the output check looks for.
const standin = `import json, os, sys
keys = ["RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE",
        "ROLE_RANK", "ROLE_NAME", "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "CUDA_VISIBLE_DEVICES",
        "NCCL_ASYNC_ERROR_HANDLING", "OMP_NUM_THREADS"]
rep = {k: os.environ.get(k) for k in keys}
for k in os.environ:
    if k.startswith("TORCHELASTIC_"):
        rep[k] = os.environ[k]
rep["argv"] = sys.argv[1:]
with open(os.path.join(os.environ["CORPUS_OUT"], "rank%s.json" % os.environ["RANK"]), "w") as f:
    json.dump(rep, f)
print("corpus rank %s of %s" % (os.environ["RANK"], os.environ["WORLD_SIZE"]), flush=True)
`

// Variables compared by value; the others torchrun sets are compared by
// presence: MASTER_ADDR and MASTER_PORT (a c10d store's host and port,
// or on one node amdrun's free port where torchrun takes 29500; by value
// when a static line names them), TORCHELASTIC_RUN_ID (by value when
// the line gives --rdzv_id; else torchrun's "none", amdrun's own id),
// TORCHELASTIC_ERROR_FILE (a path of each launcher's),
// TORCHELASTIC_USE_AGENT_STORE (True under torch's agent, which hosts
// the store; False where the ranks host it, as under amdrun).
// OMP_NUM_THREADS is amdrun's per-rank CPU share by design.
var corpusByValue = []string{"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE",
	"ROLE_RANK", "ROLE_NAME", "ROLE_WORLD_SIZE", "CUDA_VISIBLE_DEVICES", "NCCL_ASYNC_ERROR_HANDLING",
	"TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS"}

// standinLine is the line the stand-in prints.
var standinLine = regexp.MustCompile(`corpus rank (\d+) of \d+`)

// corpusRun is one launcher's run of a line.
type corpusRun struct {
	code    int
	stdout  string
	stderr  string
	reports map[int]map[string]any
}

// TestTorchrunCorpus runs every line of the corpus under both launchers
// ("run": exit code, each rank's torchrun variables, the stand-in's
// arguments, every shown rank's output line once with a prefix naming
// its rank), or compares amdrun's plan with torchrun's static rank
// assignment ("plan", multi-node lines that one machine cannot run), or
// checks both refuse it alike ("fail": --nproc_per_node=gpu on a
// machine without a GPU).
func TestTorchrunCorpus(t *testing.T) {
	testutil.EndToEnd(t)
	py := patchedPython(t, needTorch(t))
	dir := t.TempDir()
	script := filepath.Join(dir, "corpus_standin.py")
	if err := os.WriteFile(script, []byte(standin), 0o644); err != nil {
		t.Fatal(err)
	}
	noSysfs := t.TempDir() // no GPU: amdrun's CPU ranks, on every machine
	base := append(toolEnv(t, systemPath()), "PYTHONPATH="+dir, "PYTHON_EXEC="+py, "AMDRUN_SYSFS_ROOT="+noSysfs)

	lines := readCorpus(t)
	if len(lines) < 20 {
		t.Fatalf("%d corpus lines, want at least 20", len(lines))
	}
	for _, c := range lines {
		t.Run(c.id, func(t *testing.T) {
			// Two lines at a time on a 2-core machine (go test -parallel
			// is GOMAXPROCS): torchrun's start is one core importing torch.
			t.Parallel()
			args := func() []string {
				f := strings.Fields(c.run)
				if f[0] != "torchrun" {
					t.Fatalf("runnable line %q does not start with torchrun", c.run)
				}
				port := strconv.Itoa(freePort(t))
				var out []string
				for _, a := range f[1:] {
					a = strings.ReplaceAll(a, "{PORT}", port)
					switch a {
					case "{SCRIPT}":
						a = script
					case "{MODULE}":
						a = "corpus_standin"
					}
					out = append(out, a)
				}
				return out
			}
			if c.compare == "plan" {
				comparePlan(t, base, args())
				return
			}
			trArgs, amArgs := for113(args()), args()
			if !strings.Contains(c.run, "{PORT}") {
				// torchrun takes 29500 for a line without a port: one such
				// line at a time, once the port is free (CI saw two lines
				// run at once fail with "Address already in use").
				defaultPort.Lock()
				defer defaultPort.Unlock()
				waitPortFree(t, 29500)
			}
			tr := runCorpus(t, base, append([]string{py, "-m", "torch.distributed.run"}, trArgs...))
			am := runCorpus(t, base, append([]string{amdrunBin}, amArgs...))
			t.Logf("%s (%s, from %s)\ntorchrun: exit %d, %d ranks; amdrun: exit %d, %d ranks",
				c.published, c.kind, c.source, tr.code, len(tr.reports), am.code, len(am.reports))
			if c.compare == "fail" {
				if tr.code == 0 || am.code != tr.code || len(tr.reports)+len(am.reports) > 0 {
					t.Errorf("torchrun exit %d, amdrun exit %d, %d+%d ranks ran; want both to refuse alike\namdrun stderr:\n%s",
						tr.code, am.code, len(tr.reports), len(am.reports), am.stderr)
				}
				return
			}
			if tr.code != 0 {
				t.Fatalf("torchrun exit %d\n%s", tr.code, tr.stderr)
			}
			if am.code != tr.code {
				t.Fatalf("amdrun exit %d, torchrun %d\n%s", am.code, tr.code, am.stderr)
			}
			compareRanks(t, c, trArgs, amArgs, tr, am)
			checkPrefixes(t, "torchrun", tr, nil)
			checkPrefixes(t, "amdrun", am, shownRanks(amArgs))
		})
	}
}

// defaultPort is held by a line whose torchrun run takes torchrun's
// default port, 29500.
var defaultPort sync.Mutex

// waitPortFree waits until port can be bound on every address (another
// test's job may still hold it), failing after a minute.
func waitPortFree(t *testing.T, port int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		l, err := net.Listen("tcp", fmt.Sprintf(":%d", port))
		if err == nil {
			l.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("port %d still in use after a minute: %v", port, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// runCorpus runs argv with base plus a fresh CORPUS_OUT and reads the
// rank reports.
func runCorpus(t *testing.T, base, argv []string) corpusRun {
	t.Helper()
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(slices.Clone(base), "CORPUS_OUT="+out)
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := corpusRun{stdout: stdout.String(), stderr: stderr.String(), reports: map[int]map[string]any{}}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%v: %v\n%s", argv, err, r.stderr)
	}
	if ctx.Err() != nil {
		t.Fatalf("%v: still running after 2 minutes\n%s", argv, r.stderr)
	}
	files, _ := filepath.Glob(filepath.Join(out, "rank*.json"))
	for _, f := range files {
		var rep map[string]any
		if err := json.Unmarshal(testutil.ReadFile(t, f), &rep); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		rank, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(filepath.Base(f), "rank"), ".json"))
		if err != nil {
			t.Fatal(err)
		}
		r.reports[rank] = rep
	}
	return r
}

// torchrunBool are torchrun's options that take no value (underscore
// spelling); -m/--module also ends the options.
var torchrunBool = []string{"standalone", "no_python", "run_path", "module", "virtual_local_rank"}

// torchrunOptions splits args into torchrun's options (each with its
// value, if any, as one or two tokens) and the script with its arguments.
func torchrunOptions(args []string) (opts [][]string, rest []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "-m" || a == "--module" || !strings.HasPrefix(a, "-") {
			return opts, args[i:]
		}
		name, _, eq := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if eq || slices.Contains(torchrunBool, strings.ReplaceAll(name, "-", "_")) || i+1 == len(args) {
			opts = append(opts, []string{a})
			continue
		}
		opts = append(opts, []string{a, args[i+1]})
		i++
	}
	return opts, nil
}

// optName is an option's name in underscore spelling.
func optName(tok string) string {
	name, _, _ := strings.Cut(strings.TrimLeft(tok, "-"), "=")
	return strings.ReplaceAll(name, "-", "_")
}

// for113 is a line for Debian's torchrun (torch 1.13): it knows only the
// underscore spellings of its options (later releases take both), and
// not --local-ranks-filter (torch 2.3), which only filters the console,
// so the reference run shows every rank.
func for113(args []string) []string {
	opts, rest := torchrunOptions(args)
	var out []string
	for _, o := range opts {
		if optName(o[0]) == "local_ranks_filter" {
			continue
		}
		a := "--" + optName(o[0])
		if _, v, eq := strings.Cut(o[0], "="); eq {
			a += "=" + v
		}
		out = append(out, append([]string{a}, o[1:]...)...)
	}
	return append(out, rest...)
}

// flagValue is the value of torchrun option name (underscore spelling)
// in args, "" when absent.
func flagValue(args []string, name string) string {
	opts, _ := torchrunOptions(args)
	for _, o := range opts {
		if optName(o[0]) != name {
			continue
		}
		if _, v, eq := strings.Cut(o[0], "="); eq {
			return v
		}
		if len(o) == 2 {
			return o[1]
		}
		return "true"
	}
	return ""
}

// shownRanks is the ranks whose output reaches amdrun's console: those
// of --local-ranks-filter (one node: local ranks are ranks), nil for all.
func shownRanks(args []string) []int {
	v := flagValue(args, "local_ranks_filter")
	if v == "" {
		return nil
	}
	var out []int
	for _, f := range strings.Split(v, ",") {
		n, _ := strconv.Atoi(f)
		out = append(out, n)
	}
	return out
}

// compareRanks compares the two launchers' rank reports.
func compareRanks(t *testing.T, c corpusLine, trArgs, amArgs []string, tr, am corpusRun) {
	t.Helper()
	if len(tr.reports) == 0 || len(am.reports) != len(tr.reports) {
		t.Fatalf("torchrun ran %d ranks, amdrun %d", len(tr.reports), len(am.reports))
	}
	byValue := slices.Clone(corpusByValue)
	if flagValue(amArgs, "rdzv_id") != "" {
		byValue = append(byValue, "TORCHELASTIC_RUN_ID")
	}
	// A static line's master is the one it names, in each run (the two
	// runs had a free port each).
	static := flagValue(amArgs, "rdzv_backend") == "" && flagValue(amArgs, "standalone") == ""
	for _, m := range []struct{ flag, name string }{{"master_addr", "MASTER_ADDR"}, {"master_port", "MASTER_PORT"}} {
		if !static || flagValue(amArgs, m.flag) == "" {
			continue
		}
		for who, run := range map[string]corpusRun{"torchrun": tr, "amdrun": am} {
			want := flagValue(map[string][]string{"torchrun": trArgs, "amdrun": amArgs}[who], m.flag)
			for rank, rep := range run.reports {
				if fmt.Sprint(rep[m.name]) != want {
					t.Errorf("%s rank %d: %s=%v, the line names %s", who, rank, m.name, rep[m.name], want)
				}
			}
		}
	}
	for rank, want := range tr.reports {
		got, ok := am.reports[rank]
		if !ok {
			t.Errorf("rank %d ran under torchrun, not under amdrun", rank)
			continue
		}
		for _, k := range byValue {
			if fmt.Sprint(got[k]) != fmt.Sprint(want[k]) {
				t.Errorf("rank %d: %s=%v under amdrun, %v under torchrun", rank, k, got[k], want[k])
			}
		}
		for k, v := range want {
			if v != nil && got[k] == nil {
				t.Errorf("rank %d: torchrun sets %s (%v), amdrun does not", rank, k, v)
			}
		}
		for k := range got {
			if _, ok := want[k]; !ok && strings.HasPrefix(k, "TORCHELASTIC_") {
				t.Errorf("rank %d: amdrun sets %s=%v, torchrun does not", rank, k, got[k])
			}
		}
		if fmt.Sprint(got["argv"]) != fmt.Sprint(want["argv"]) {
			t.Errorf("rank %d: script arguments %v under amdrun, %v under torchrun", rank, got["argv"], want["argv"])
		}
	}
}

// checkPrefixes checks that each shown rank's stand-in line is on the
// console once, prefixed by nothing or by a prefix naming that rank:
// amdrun's "[rankN]: ", torch's tee prefix "[ROLE_NAMEN]:" (local rank).
// shown nil means every rank.
func checkPrefixes(t *testing.T, who string, r corpusRun, shown []int) {
	t.Helper()
	seen := map[int]int{}
	// torchrun's ranks share its stdout: two ranks' lines can run into
	// one ("corpus rank 1 of 2corpus rank 0 of 2"), so a prefix is the
	// text since the line's start or the previous rank's line.
	end := 0
	for _, m := range standinLine.FindAllStringSubmatchIndex(r.stdout, -1) {
		start := max(end, strings.LastIndex(r.stdout[:m[0]], "\n")+1)
		prefix := r.stdout[start:m[0]]
		end = m[1]
		rank, _ := strconv.Atoi(r.stdout[m[2]:m[3]])
		seen[rank]++
		ok := []string{"", fmt.Sprintf("[rank%d]: ", rank)}
		if rep := r.reports[rank]; rep != nil {
			ok = append(ok, fmt.Sprintf("[%v%v]:", rep["ROLE_NAME"], rep["LOCAL_RANK"]))
		}
		if !slices.Contains(ok, prefix) {
			t.Errorf("%s: rank %d's line has prefix %q, want one of %q", who, rank, prefix, ok)
		}
	}
	for rank := range r.reports {
		want := 1
		if shown != nil && !slices.Contains(shown, rank) {
			want = 0
		}
		if seen[rank] != want {
			t.Errorf("%s: rank %d's line shown %d times, want %d\nstdout:\n%s", who, rank, seen[rank], want, r.stdout)
		}
	}
}

// comparePlan compares amdrun's dry-run plan of a multi-node static line
// with what torchrun's static rendezvous sets: node N of a job of M
// nodes with P ranks each gets ranks N*P .. N*P+P-1 of M*P, its group
// rank N, and the master named on the line.
func comparePlan(t *testing.T, base, args []string) {
	t.Helper()
	nnodes, _ := strconv.Atoi(flagValue(args, "nnodes"))
	node, _ := strconv.Atoi(flagValue(args, "node_rank"))
	nproc, _ := strconv.Atoi(flagValue(args, "nproc_per_node"))
	r, err := runJob(base, append([]string{"--dry-run", "--json"}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	p := planOf(t, r, args)
	if len(p.Ranks) != nproc {
		t.Fatalf("plan of %d ranks, want %d", len(p.Ranks), nproc)
	}
	for l, rk := range p.Ranks {
		rank := node*nproc + l
		want := map[string]string{
			"RANK": strconv.Itoa(rank), "LOCAL_RANK": strconv.Itoa(l), "WORLD_SIZE": strconv.Itoa(nnodes * nproc),
			"LOCAL_WORLD_SIZE": strconv.Itoa(nproc), "GROUP_RANK": strconv.Itoa(node), "GROUP_WORLD_SIZE": strconv.Itoa(nnodes),
			"ROLE_RANK": strconv.Itoa(rank), "ROLE_WORLD_SIZE": strconv.Itoa(nnodes * nproc), "ROLE_NAME": "default",
			"MASTER_ADDR": flagValue(args, "master_addr"), "MASTER_PORT": flagValue(args, "master_port"),
			"TORCHELASTIC_RESTART_COUNT": "0", "TORCHELASTIC_MAX_RESTARTS": "0",
		}
		for k, v := range want {
			if rk.Env[k] != v {
				t.Errorf("local rank %d: %s=%q in amdrun's plan, torchrun sets %q", l, k, rk.Env[k], v)
			}
		}
		for _, k := range []string{"TORCHELASTIC_RUN_ID", "TORCHELASTIC_USE_AGENT_STORE"} {
			if rk.Env[k] == "" {
				t.Errorf("local rank %d: %s unset in amdrun's plan; torchrun sets it", l, k)
			}
		}
	}
}
