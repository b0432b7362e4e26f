package launch

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// threadsPerRank is how many of the user's tasks (processes and threads:
// RLIMIT_NPROC counts both) a rank costs while it starts: the rank, its
// guard (a Go process of a few threads) and the bind shim; measured at 5
// to 7 under ulimit -u, with room to spare.
const threadsPerRank = 8

// threadsOwn is what amdrun itself may still add while it supervises.
const threadsOwn = 8

// checkProcessRoom refuses a job whose stack limit is too small
// (checkStack), or of ranks ranks when the process limit
// (ulimit -u) does not leave room for its ranks, guards and threads
// beside everything the user runs now. The Go runtime cannot recover
// from a thread it fails to create (`fatal error: newosproc`, a 341-line
// stack under ulimit -u 10, issue 26), so the room is checked before
// anything starts. Root, and a limit of unlimited, are not checked.
func checkProcessRoom(ranks int) error {
	if err := checkStack(); err != nil {
		return err
	}
	var rl unix.Rlimit
	if os.Geteuid() == 0 || unix.Getrlimit(unix.RLIMIT_NPROC, &rl) != nil || rl.Cur == unix.RLIM_INFINITY {
		return nil
	}
	used := userTasks(os.Getuid())
	need := threadsOwn + threadsPerRank*ranks
	if used+need <= int(rl.Cur) {
		return nil
	}
	return fmt.Errorf("launch: the process limit (ulimit -u %d) is too low for %d rank(s): this user runs %d processes and threads, and the ranks with their guards need about %d more; raise ulimit -u or run fewer ranks",
		rl.Cur, ranks, used, need)
}

// minStack is the smallest stack limit (RLIMIT_STACK, ulimit -s) under
// which amdrun's guards and keeper start: under 16 KiB a guard or keeper
// died of SIGSEGV as it started, now and then, and the summary named a
// guard that ended (issue 36.6); amdrun itself needs about 20 KiB.
const minStack = 32 << 10

// checkStack refuses a job whose stack limit is below minStack, in one
// line naming the limit, before anything starts.
func checkStack() error {
	var rl unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_STACK, &rl) != nil || rl.Cur == unix.RLIM_INFINITY || rl.Cur >= minStack {
		return nil
	}
	return fmt.Errorf("launch: the stack limit (ulimit -s %d) is too small for amdrun's guards: raise it to at least %d (KiB)", rl.Cur>>10, minStack>>10)
}

// userTasks counts the tasks (threads of every process) whose real uid
// is uid, as the kernel counts them against RLIMIT_NPROC.
func userTasks(uid int) int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/status")
		ids, _ := statusLine(b, "Uid")
		if f := strings.Fields(ids); err == nil && len(f) > 0 && f[0] == strconv.Itoa(uid) {
			t, _ := statusLine(b, "Threads")
			threads, _ := strconv.Atoi(t)
			n += max(threads, 1)
		}
	}
	return n
}
