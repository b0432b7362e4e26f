package launch

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// threadsPerRank is how many tasks (RLIMIT_NPROC counts threads) a rank
// costs as it starts, with its guard and shim (measured 5 to 7).
const threadsPerRank = 8

// threadsOwn is what amdrun itself may still add while it supervises.
const threadsOwn = 8

// checkProcessRoom refuses a stack limit too small or a ulimit -u without
// room for ranks ranks, their guards and threads: Go cannot recover from a
// thread it fails to create (issue 26).
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

// minStack is the smallest ulimit -s for the guards and keeper: under 16
// KiB one died of SIGSEGV now and then (issue 36.6).
const minStack = 32 << 10

func checkStack() error {
	var rl unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_STACK, &rl) != nil || rl.Cur == unix.RLIM_INFINITY || rl.Cur >= minStack {
		return nil
	}
	return fmt.Errorf("launch: the stack limit (ulimit -s %d) is too small for amdrun's guards: raise it to at least %d (KiB)", rl.Cur>>10, minStack>>10)
}

// userTasks counts uid's tasks as RLIMIT_NPROC does.
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
