package launch

import (
	"context"
	_ "embed"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/amdrun/amdrun/internal/envlist"
	"github.com/amdrun/amdrun/internal/plan"
	"github.com/amdrun/amdrun/internal/printable"
)

// StackSignal makes a rank write its stacks: SIGRTMIN+7 (glibc's SIGRTMIN
// is 34), which no library of the Python/torch stack uses.
const StackSignal = unix.Signal(34 + 7)

const stackAnswerTimeout = 700 * time.Millisecond

const (
	bootstrapFile = "sitecustomize.py"
	// pycacheFile is a plain file where Python would make a directory:
	// it writes no bytecode, and amdrun can empty the errorDir.
	pycacheFile = "__pycache__"
	ctlSocket   = "ctl.sock"
)

// stackFileName matches stacks.ATTEMPT.RANK.PID and heartbeat.ATTEMPT.RANK.
var stackFileName = regexp.MustCompile(`^(stacks\.[0-9]+\.[0-9]+\.[0-9]+|heartbeat\.[0-9]+\.[0-9]+)$`)

// ownFile says whether name is one amdrun gives out in an errorDir.
func ownFile(name string) bool {
	return errorFileName.MatchString(name) || stackFileName.MatchString(name) || frFileName.MatchString(name) ||
		name == bootstrapFile || name == pycacheFile || name == ctlSocket
}

type stacker struct {
	mu      sync.Mutex
	errs    *errorDir
	attempt int
	guards  []int          // the attempt's guards, as amdrun sees them
	ranks   []int          // the global ranks expected to answer (none: a torchrun job's agent)
	cpu     map[int]uint64 // each silent rank's CPU time at the last take, in ticks
}

// cpuGrew says whether pid used CPU since the last take saw it silent.
func (st *stacker) cpuGrew(pid int) bool {
	f, err := statFields(pid)
	if err != nil {
		return false
	}
	u, _ := strconv.ParseUint(f[11], 10, 64) // utime and stime, fields 14 and 15
	k, _ := strconv.ParseUint(f[12], 10, 64)
	before, seen := st.cpu[pid]
	st.cpu[pid] = u + k
	return seen && u+k > before
}

func (e *errorDir) writeBootstrap() error {
	for _, n := range []struct{ name, text string }{{bootstrapFile, stackBootstrap}, {pycacheFile, ""}} {
		f, err := createIn(e.File, n.name)
		if err == nil {
			_, err = f.WriteString(n.text)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			return fmt.Errorf("launch: stacks bootstrap: %w", err)
		}
	}
	return nil
}

// stackEnv adds to a rank's env what the bootstrap and the heartbeat need.
func (e *errorDir) stackEnv(env []string, attempt, rank int) []string {
	pp := e.Name()
	if old, ok := envlist.Lookup(env, "PYTHONPATH"); ok && old != "" {
		pp += string(os.PathListSeparator) + old
	}
	env = plan.WithEnv(env, "PYTHONPATH", pp)
	env = plan.WithEnv(env, "AMDRUN_STACKS", filepath.Join(e.Name(), fmt.Sprintf("stacks.%d", attempt)))
	env = plan.WithEnv(env, "AMDRUN_STACKS_SIGNAL", strconv.Itoa(int(StackSignal)))
	return plan.WithEnv(env, EnvHeartbeat, filepath.Join(e.Name(), fmt.Sprintf("heartbeat.%d.%d", attempt, rank)))
}

// EnvHeartbeat names the file each rank may touch to say it progresses.
const EnvHeartbeat = "AMDRUN_HEARTBEAT"

func (st *stacker) begin(attempt int, g *group) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.attempt, st.guards, st.ranks = attempt, nil, nil
	for _, w := range g.workers {
		st.guards = append(st.guards, w.guard)
		if _, ok := envlist.Lookup(w.r.Env, "RANK"); ok {
			st.ranks = append(st.ranks, w.r.Rank)
		}
	}
}

type target struct {
	rank int
	file string
	pid  int // as amdrun sees it
}

// targets finds the attempt's registered rank processes still running: a
// stack file's pid matched by the NSpid of one amdrun sees.
func (st *stacker) targets() []target {
	byNS := map[int]int{}
	for _, g := range st.guards {
		for _, p := range descendants(g) {
			// Only one that blocks the signal: another would die of it.
			if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p)); err == nil && blocks(b, StackSignal) {
				byNS[innermostPID(b)] = p
			}
		}
	}
	names, _ := os.ReadDir(st.errs.Name())
	prefix := fmt.Sprintf("stacks.%d.", st.attempt)
	var out []target
	for _, n := range names {
		rest, ok := strings.CutPrefix(n.Name(), prefix)
		rs, ps, ok2 := strings.Cut(rest, ".")
		rank, err1 := strconv.Atoi(rs)
		ns, err2 := strconv.Atoi(ps)
		if !ok || !ok2 || err1 != nil || err2 != nil {
			continue
		}
		if pid, live := byNS[ns]; live {
			out = append(out, target{rank: rank, file: n.Name(), pid: pid})
		}
	}
	return out
}

// blocks says whether a status text's SigBlk mask blocks sig.
func blocks(status []byte, sig unix.Signal) bool {
	mask, err := strconv.ParseUint(statusLine(status, "SigBlk"), 16, 64)
	return err == nil && mask&(1<<(uint(sig)-1)) != 0
}

// take signals every registered rank and returns each rank's dump (empty:
// no answer). busy: a rank that did not answer used CPU since the last take
// (in C code holding the GIL: loading torch took over 5 s on a busy host).
func (st *stacker) take() (_ []RankStacks, busy bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	ts := st.targets()
	files := make([]*os.File, len(ts))
	for i, t := range ts {
		fd, err := unix.Openat(int(st.errs.Fd()), t.file, unix.O_RDWR|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			continue
		}
		files[i] = os.NewFile(uintptr(fd), t.file)
		defer files[i].Close()
		if unix.Ftruncate(fd, 0) == nil {
			_ = unix.Kill(t.pid, StackSignal)
		}
	}
	dumps := readDumps(files, time.Now().Add(stackAnswerTimeout))
	got := map[int]string{}
	for _, r := range st.ranks {
		got[r] = ""
	}
	for i, t := range ts {
		if got[t.rank] == "" {
			got[t.rank] = dumps[i]
		}
		if dumps[i] == "" {
			busy = st.cpuGrew(t.pid) || busy
		}
	}
	var out []RankStacks
	for _, r := range slices.Sorted(maps.Keys(got)) {
		out = append(out, RankStacks{Rank: r, Dump: got[r]})
	}
	return out, busy
}

// readDumps waits until each file holds a whole dump (not empty, unchanged
// for two polls) or the deadline passes.
func readDumps(files []*os.File, deadline time.Time) []string {
	out := make([]string, len(files))
	size := make([]int64, len(files))
	done := make([]bool, len(files))
	for left := len(files); left > 0 && time.Now().Before(deadline); {
		time.Sleep(4 * time.Millisecond)
		for i, f := range files {
			if done[i] {
				continue
			}
			var st unix.Stat_t
			if f != nil && unix.Fstat(int(f.Fd()), &st) == nil && (st.Size == 0 || st.Size != size[i]) {
				size[i] = st.Size
				continue
			}
			done[i] = true
			left--
		}
	}
	for i, f := range files {
		if f == nil || size[i] == 0 {
			continue
		}
		b := make([]byte, min(size[i], 1<<20))
		n, _ := f.ReadAt(b, 0)
		out[i] = string(b[:n])
	}
	return out
}

// heartbeats is when a rank last touched its heartbeat file (zero: never).
func (st *stacker) heartbeats() time.Time {
	st.mu.Lock()
	defer st.mu.Unlock()
	var last time.Time
	names, _ := os.ReadDir(st.errs.Name())
	prefix := fmt.Sprintf("heartbeat.%d.", st.attempt)
	for _, n := range names {
		if !strings.HasPrefix(n.Name(), prefix) {
			continue
		}
		if fi, err := n.Info(); err == nil && fi.ModTime().After(last) {
			last = fi.ModTime()
		}
	}
	return last
}

// nativeTimeout bounds one rank's py-spy dump (`amdrun stacks` waits 10 s).
const nativeTimeout = 5 * time.Second

// native appends each rank's native stacks from py-spy, if on the PATH.
func (st *stacker) native(w io.Writer) {
	spy, err := exec.LookPath("py-spy")
	if err != nil {
		fmt.Fprintf(w, "\namdrun: --native: py-spy is not on the job's PATH: no native frames\n")
		return
	}
	st.mu.Lock()
	ts := st.targets()
	st.mu.Unlock()
	slices.SortFunc(ts, func(a, b target) int { return a.rank - b.rank })
	outs := make([][]byte, len(ts))
	var wg sync.WaitGroup
	for i, t := range ts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), nativeTimeout)
			defer cancel()
			out, err := exec.CommandContext(ctx, spy, "dump", "--native", "--pid", strconv.Itoa(t.pid)).CombinedOutput()
			if err != nil {
				out = fmt.Appendf(nil, "py-spy dump --native --pid %d: %v: %s\n", t.pid, err, printable.String(strings.TrimSpace(string(out)), 300))
			}
			outs[i] = out
		}()
	}
	wg.Wait()
	for i, t := range ts {
		fmt.Fprintf(w, "\nrank %d, native (py-spy dump --native, pid %d):\n%s", t.rank, t.pid, outs[i])
	}
}

// stackBootstrap is the sitecustomize.py amdrun writes into the job's
// private directory, first on every rank's PYTHONPATH (docs/supervision.md).
//
//go:embed sitecustomize.py
var stackBootstrap string
