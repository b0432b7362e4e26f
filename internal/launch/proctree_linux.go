package launch

// The process tree as /proc shows it, and the sweeps over it that the
// guards, the keeper and the subreaper share.

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// sweepPoll is how long a sweep waits at most between rounds of SIGKILL
// (a child's death starts the next round at once): a process forked
// while the previous round was being sent, or one in an uninterruptible
// sleep, is caught by a later round. Short rounds back to back would
// only take CPU from the dying.
const sweepPoll = 5 * time.Millisecond

// nextRound waits until a child has died or sweepPoll has passed.
func nextRound(chld <-chan os.Signal) {
	t := time.NewTimer(sweepPoll)
	defer t.Stop()
	select {
	case <-chld:
	case <-t.C:
	}
}

// onlyZombies says whether every process but this one that /proc shows
// has exited (state Z or X).
func onlyZombies() bool {
	return eachStat(func(_ int, b []byte) bool { s := statState(b); return s == 'Z' || s == 'X' })
}

// eachStat calls f with the pid and /proc/PID/stat of every process but
// this one that /proc shows, until f returns false; it returns false
// then, or when /proc cannot be read.
func eachStat(f func(pid int, stat []byte) bool) bool {
	ents, err := readProcDir("")
	if err != nil {
		return false
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		if b, err := readProc(e.Name() + "/stat"); err == nil && !f(pid, b) { // err: gone
			return false
		}
	}
	return true
}

// reapAll reaps every child that has exited, passing each to f (when
// set). It reports whether no child at all is left (ECHILD).
func reapAll(f func(pid int, ws unix.WaitStatus)) (none bool) {
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return err == unix.ECHILD
		case pid <= 0:
			return false
		}
		if f != nil {
			f(pid, ws)
		}
	}
}

// sweep SIGKILLs every descendant of this process and reaps them, round
// after round, until this process has no child left; f gets each reaped
// child, and chld must get this process's SIGCHLD. This process must be
// a subreaper, so that the children of a killed process come to it and
// are caught by the next round.
//
// A pid read from /proc is killed a moment later; it cannot name another
// process by then unless the kernel handed out every other pid in between
// (pids are allocated cyclically), so no unrelated process is hit.
func sweep(f func(pid int, ws unix.WaitStatus), chld <-chan os.Signal) {
	for {
		// No child left means no descendant left (it would hang under
		// one): the usual end, found without reading /proc.
		if reapAll(f) {
			return
		}
		killStrays(func(int) bool { return false }, map[int]bool{})
		nextRound(chld)
	}
}

// killStrays SIGKILLs every child of this process that keep does not
// keep, and all it started, adding each to killed; it returns those
// children.
func killStrays(keep func(int) bool, killed map[int]bool) []int {
	var strays []int
	for _, c := range childrenNow(os.Getpid()) {
		if keep(c) {
			continue
		}
		strays = append(strays, c)
		for _, d := range append(descendants(c), c) {
			killed[d] = true
			_ = unix.Kill(d, unix.SIGKILL)
		}
	}
	return strays
}

// childLister lists a process's children from /proc: its children files
// (childrenOf), or where the kernel has none one scan of /proc/*/stat,
// taken now.
func childLister() func(int) []int {
	if childrenFiles() {
		return childrenOf
	}
	tree := processTree()
	return func(p int) []int { return tree[p] }
}

// childrenNow lists pid's children, from /proc.
func childrenNow(pid int) []int { return childLister()(pid) }

// descendants lists every descendant of pid, parents before children,
// from /proc.
func descendants(pid int) []int {
	children := childLister()
	var out []int
	queue := children(pid)
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		out = append(out, p)
		queue = append(queue, children(p)...)
	}
	return out
}

// childrenFiles says whether the kernel has /proc/PID/task/TID/children
// (CONFIG_PROC_CHILDREN).
var childrenFiles = sync.OnceValue(func() bool {
	_, err := readProc("thread-self/children")
	return err == nil
})

// procFD is /proc as a guard or the keeper opened it before any rank ran
// (keepProc), read through it from then on: a rank that unmounts or
// mounts over the job's /proc cannot blind them (issue 36.2: the guards
// then read the node's /proc with the job's pids, never found a daemon
// the rank left, and amdrun hung). -1: /proc by its path.
var procFD = -1

// keepProc opens /proc for procFD.
func keepProc() error {
	fd, err := unix.Open("/proc", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening /proc: %w", err)
	}
	procFD = fd
	return nil
}

// openProc opens rel ("" for /proc itself) in procFD's /proc, or in
// /proc by its path.
func openProc(rel string) (*os.File, error) {
	if procFD < 0 {
		return os.Open("/proc/" + rel)
	}
	if rel == "" {
		rel = "."
	}
	fd, err := unix.Openat(procFD, rel, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: "/proc/" + rel, Err: err}
	}
	return os.NewFile(uintptr(fd), "/proc/"+rel), nil
}

// readProc reads the file rel of /proc (see openProc).
func readProc(rel string) ([]byte, error) {
	f, err := openProc(rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// readProcDir lists the directory rel of /proc (see openProc).
func readProcDir(rel string) ([]os.DirEntry, error) {
	f, err := openProc(rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.ReadDir(-1)
}

// childrenOf lists pid's children from /proc/PID/task/*/children: a
// child belongs to the thread that forked it, or, reparented, to any
// thread of its new parent.
func childrenOf(pid int) []int {
	dir := fmt.Sprintf("%d/task/", pid)
	// Not filepath.Glob: it would list every task's directory to match
	// one name.
	tasks, _ := readProcDir(dir)
	var out []int
	for _, t := range tasks {
		b, err := readProc(dir + t.Name() + "/children")
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if c, err := strconv.Atoi(f); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}

// processTree maps every process to its children, from /proc/*/stat.
func processTree() map[int][]int {
	tree := map[int][]int{}
	eachStat(func(pid int, b []byte) bool {
		if ppid, ok := statParent(b); ok {
			tree[ppid] = append(tree[ppid], pid)
		}
		return true
	})
	return tree
}

// statFieldsOf are the fields of a /proc/PID/stat line, "pid (comm)
// state ppid ...", that follow comm, which may hold spaces and
// parentheses; nil without one.
func statFieldsOf(b []byte) []string {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(string(b[i+1:]))
}

// statState is the state letter of a /proc/PID/stat line (R, S, D, Z,
// ...); 0 if it cannot be read.
func statState(b []byte) byte {
	if f := statFieldsOf(b); len(f) > 0 {
		return f[0][0]
	}
	return 0
}

// statParent parses the parent pid out of a /proc/PID/stat line.
func statParent(b []byte) (int, bool) {
	f := statFieldsOf(b)
	if len(f) < 2 {
		return 0, false
	}
	ppid, err := strconv.Atoi(f[1])
	return ppid, err == nil
}

// hostPID finds, among the children of guard (a pid in amdrun's
// namespace), the one whose pid in the job's namespace is nsPID, and
// returns its pid in amdrun's namespace; 0 when there is none.
func hostPID(guard, nsPID int) int {
	for _, k := range childrenNow(guard) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", k))
		if err == nil && innermostPID(b) == nsPID {
			return k
		}
	}
	return 0
}

// innermostPID is a process's number in the innermost PID namespace it
// belongs to, from its /proc/PID/status: the last field of the NSpid
// line; 0 if there is none.
func innermostPID(status []byte) int {
	v, _ := statusLine(status, "NSpid")
	f := strings.Fields(v)
	if len(f) == 0 {
		return 0
	}
	n, _ := strconv.Atoi(f[len(f)-1])
	return n
}

// statusLine is the value of the "key:" line of a /proc/PID/status text.
func statusLine(status []byte, key string) (string, bool) {
	for _, l := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(l, key+":"); ok {
			return strings.TrimSpace(v), true
		}
	}
	return "", false
}
