package main_test

import (
	"cmp"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/amdrun/amdrun/internal/testutil"
)

// TestQueueAtScale: 32 --wait jobs of two throwaway users, each for all 8
// devices, queue one after another behind root's job; once it ends every
// one starts, one at a time, and no two run at once (each job's one rank
// holds a non-blocking flock on a common file while it logs its start:
// an overlap fails the job). Issue 36.7: behind ~190 waiters 7 of 200
// jobs ran in 270 s. It asserts completeness and exclusion, not time or
// order (bench/queue-scale.py measures those).
func TestQueueAtScale(t *testing.T) {
	s := newShared(t)
	users := []testutil.User{testutil.NewUserPrefixed(t, "queue-"), testutil.NewUserPrefixed(t, "queue-")}
	dir := filepath.Join(testutil.SharedDir(t, 0o755), "amdrun")
	s.rootPrepared(dir)
	logs := testutil.SharedDir(t, 0o777) // not sticky: both users open root's files for writing
	started, probe := filepath.Join(logs, "started"), filepath.Join(logs, "probe")
	for _, f := range []string{started, probe} {
		if err := os.WriteFile(f, nil, 0o666); err != nil {
			t.Fatal(err)
		}
		os.Chmod(f, 0o666)
	}
	// Root's job holds the 8 devices until it is stopped.
	holder, holderErr := s.start(nil, s.envFor(dir), "--ngpus", "8", "--no-python", "/bin/sleep", "600")
	s.waitLeased(dir, 8, holder, holderErr)
	const n = 32
	jobs := make([]*exec.Cmd, n)
	done := make(chan int, n)
	for i := range jobs {
		// Rank 0 reads amdrun's stdin: "job I" is appended to started.
		j := asUser(&users[i%2], "--topology", s.topo, "--wait=5m", "--ngpus", "8", "--nproc-per-node", "1",
			"--no-python", "/usr/bin/flock", "--nonblock", probe, "/usr/bin/tee", "-a", started)
		j.Env, j.Stdin, j.Stderr = s.envFor(dir), strings.NewReader(fmt.Sprintf("job %d\n", i)), newSyncBuf()
		if err := j.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { j.Process.Kill() })
		go func() { j.Wait(); done <- i }()
		jobs[i] = j
		s.waitQueued(dir, j.Process.Pid)
	}
	want := s.queueOrder(dir, jobs)
	holder.Process.Signal(syscall.SIGTERM)
	deadline := time.After(4 * time.Minute)
	for range n {
		select {
		case <-done:
		case <-deadline:
			t.Fatalf("not every queued job ended in 4 minutes; started:\n%s", readFile(t, started))
		}
	}
	for i, j := range jobs {
		if code := j.ProcessState.ExitCode(); code != 0 {
			t.Errorf("job %d (%s): exit %d\n%s", i, users[i%2].Name, code, j.Stderr)
		}
	}
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(readFile(t, started)), "\n") {
		got = append(got, strings.TrimPrefix(l, "job "))
	}
	// The order is logged, not asserted: a waiter that does not take free
	// devices within its patience (3 s, counted from the looks of the
	// waiters behind it) is passed over by design, and on two busy cores
	// that moved jobs two or three places (1 run in 10 while the race
	// tests ran). bench/queue-scale.py counts order faults at scale.
	var moved []string
	for i, g := range got {
		if at := slices.Index(want, g); at != i {
			moved = append(moved, fmt.Sprintf("job %s started %+d places from its ticket", g, at-i))
		}
	}
	if len(got) != len(want) {
		t.Errorf("jobs started %v, want every one of the queue's %v", got, want)
	}
	t.Logf("started in the order %v; %d out of place %v", got, len(moved), moved)
}

// waitQueued waits until ps shows pid's ticket in dir's queue.
func (s *shared) waitQueued(dir string, pid int) {
	s.t.Helper()
	for end := time.Now().Add(60 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		for _, w := range s.queueOf(dir) {
			if w.PID == pid {
				return
			}
		}
	}
	s.t.Fatalf("pid %d did not join the queue in 60 s", pid)
}

// queueOrder is the jobs' numbers in the queue's order: their tickets
// (queue/UID-PID-START-INO.lock) by inode change time, then pid.
func (s *shared) queueOrder(dir string, jobs []*exec.Cmd) []string {
	s.t.Helper()
	type ticket struct {
		job   string
		ctime int64
		pid   int
	}
	var order []ticket
	for i, j := range jobs {
		m, _ := filepath.Glob(filepath.Join(dir, "queue", fmt.Sprintf("*-%d-*.lock", j.Process.Pid)))
		var st syscall.Stat_t
		if len(m) != 1 || syscall.Stat(m[0], &st) != nil {
			s.t.Fatalf("job %d (pid %d): tickets %v", i, j.Process.Pid, m)
		}
		order = append(order, ticket{fmt.Sprint(i), st.Ctim.Sec, j.Process.Pid})
	}
	slices.SortFunc(order, func(a, b ticket) int { return cmp.Or(cmp.Compare(a.ctime, b.ctime), cmp.Compare(a.pid, b.pid)) })
	var out []string
	for _, o := range order {
		out = append(out, o.job)
	}
	return out
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
