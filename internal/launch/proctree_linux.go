package launch

// The process tree as /proc shows it, and the sweeps over it.

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// sweepPoll is the longest wait between rounds of SIGKILL (a child's death
// starts the next at once).
const sweepPoll = 5 * time.Millisecond

func nextRound(chld <-chan os.Signal) {
	select {
	case <-chld:
	case <-time.After(sweepPoll): // an unfired timer is collected (Go 1.23)
	}
}

// onlyZombies says whether every other process /proc shows has exited.
func onlyZombies() bool {
	return eachStat(func(_ int, b []byte) bool { s := statState(b); return s == 'Z' || s == 'X' })
}

// eachStat calls f with every other process's pid and stat until f
// returns false; false then, or when /proc is unreadable.
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

// reapAll reaps every exited child (f gets each); true when none is left.
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

// sweep SIGKILLs and reaps every descendant of this process, a subreaper,
// round after round, until it has no child left.
func sweep(chld <-chan os.Signal) {
	for {
		if reapAll(nil) { // no child, no descendant: found without /proc
			return
		}
		killStrays(func(int) bool { return false }, map[int]bool{})
		nextRound(chld)
	}
}

// killStrays SIGKILLs every child of this process keep does not keep, and
// all it started, adding each to killed; it returns those children.
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

// childLister lists a process's children from its children files, or one
// scan of /proc/*/stat where the kernel has none (CONFIG_PROC_CHILDREN).
func childLister() func(int) []int {
	if childrenFiles() {
		return childrenOf
	}
	tree := processTree()
	return func(p int) []int { return tree[p] }
}

func childrenNow(pid int) []int { return childLister()(pid) }

// descendants lists every descendant of pid, parents first.
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

// childrenFiles says whether /proc/PID/task/TID/children exists.
var childrenFiles = sync.OnceValue(func() bool {
	_, err := readProc("thread-self/children")
	return err == nil
})

// procFD is /proc as a guard or the keeper opened it before any rank ran
// (-1: by path), so that a rank mounting over it cannot blind them (issue
// 36.2: amdrun hung on a daemon the guards missed).
var procFD = -1

func keepProc() error {
	fd, err := unix.Open("/proc", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening /proc: %w", err)
	}
	procFD = fd
	return nil
}

// openProc opens rel ("": /proc itself) in procFD's /proc.
func openProc(rel string) (*os.File, error) {
	if procFD < 0 {
		return os.Open("/proc/" + rel)
	}
	rel = cmp.Or(rel, ".")
	fd, err := unix.Openat(procFD, rel, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: "/proc/" + rel, Err: err}
	}
	return os.NewFile(uintptr(fd), "/proc/"+rel), nil
}

func readProc(rel string) ([]byte, error) {
	f, err := openProc(rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

func readProcDir(rel string) ([]os.DirEntry, error) {
	f, err := openProc(rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.ReadDir(-1)
}

// childrenOf lists pid's children from /proc/PID/task/*/children (a child
// belongs to the thread that forked it, or, reparented, to any thread).
func childrenOf(pid int) []int {
	dir := fmt.Sprintf("%d/task/", pid)
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

// statFieldsOf are the fields of a "pid (comm) state ppid ..." stat line
// after comm, which may hold spaces and parentheses; nil without one.
func statFieldsOf(b []byte) []string {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(string(b[i+1:]))
}

// statState is a stat line's state letter; 0 if unreadable.
func statState(b []byte) byte {
	if f := statFieldsOf(b); len(f) > 0 {
		return f[0][0]
	}
	return 0
}

func statParent(b []byte) (int, bool) {
	f := statFieldsOf(b)
	if len(f) < 2 {
		return 0, false
	}
	ppid, err := strconv.Atoi(f[1])
	return ppid, err == nil
}

// hostPID is amdrun's pid of guard's child numbered nsPID in the job (or 0).
func hostPID(guard, nsPID int) int {
	for _, k := range childrenNow(guard) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", k))
		if err == nil && innermostPID(b) == nsPID {
			return k
		}
	}
	return 0
}

// innermostPID is the last field of a status text's NSpid line (the pid
// in the innermost namespace); 0 if none.
func innermostPID(status []byte) int {
	f := strings.Fields(statusLine(status, "NSpid"))
	if len(f) == 0 {
		return 0
	}
	n, _ := strconv.Atoi(f[len(f)-1])
	return n
}

// statusLine is the value of the "key:" line of a status text ("": none).
func statusLine(status []byte, key string) string {
	for _, l := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(l, key+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
