package launch

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// sweepPoll is how long a sweep waits at most between rounds of SIGKILL
// (a child's death starts the next round at once): a process forked
// while the previous round was being sent, or one in an uninterruptible
// sleep, is caught by a later round. Short rounds back to back would
// only take CPU from the dying.
const sweepPoll = 5 * time.Millisecond

// keeper is the init of a job's PID namespace, as amdrun sees it: the
// modes that have one (pidNamespace, userNamespace) share its methods.
type keeper struct {
	cmd *exec.Cmd
	// lifeline is the write end of the keeper's pipe: closing it, or
	// amdrun's death, makes the keeper empty the namespace and exit.
	lifeline *os.File
	// cwd is amdrun's working directory: entering a mount namespace moves
	// the thread to its root, and the ranks must start where amdrun runs.
	cwd  string
	done chan struct{}
	// req is where a keeper that starts the guards itself
	// (userNamespace) takes their start requests.
	req *os.File
	mu  sync.Mutex // one request at a time on req
}

// openContainment sets up the mode want (ContainAuto: the strongest
// permitted here) for one Run. A mode asked for by name that is not
// permitted here is an ErrContainment.
func openContainment(want Containment, o containOpts) (container, error) {
	if want == ContainAuto {
		c, _, err := openAuto(o)
		return c, err
	}
	m := modeNamed(want)
	if m == nil {
		return nil, fmt.Errorf("launch: unknown containment %q", string(want))
	}
	o.asked = true
	c, err := m.open(o)
	if err != nil {
		return nil, fmt.Errorf("launch: %w: %w", ErrContainment, err)
	}
	return c, nil
}

// openAuto opens the first mode, by the modes' auto order, permitted
// here; why says why each stronger mode is not (nil: none was refused).
// c is nil when no mode is permitted.
func openAuto(o containOpts) (c container, name Containment, why error) {
	for _, m := range modes {
		if m.auto == 0 {
			continue
		}
		c, err := m.open(o)
		if err == nil {
			return c, m.name, why
		}
		if why == nil {
			why = err
		} else {
			why = fmt.Errorf("%w; %w", why, err)
		}
	}
	return nil, ContainAuto, why
}

// ProbeContainment reports the containment Run chooses by default on this
// node (for `amdrun doctor`), with self as amdrun's binary, and why each
// stronger mode is not permitted here: it sets the mode up as for a job,
// and ends it.
func ProbeContainment(self string) (Containment, error) {
	c, name, why := openAuto(containOpts{self: self, note: func(string) {}})
	if c != nil {
		c.close()
	}
	return name, why
}

// userNamespaceAttr starts a process as the init of a new user, PID and
// mount namespace in which it is this process's own user and group (the
// one mapping an unprivileged process may write, setgroups denied) and
// keeps CAP_SYS_ADMIN across its exec, for mounting its /proc only.
func userNamespaceAttr() *syscall.SysProcAttr {
	uid, gid := os.Getuid(), os.Getgid()
	return &syscall.SysProcAttr{
		Cloneflags:                 unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNS,
		UidMappings:                []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}},
		GidMappings:                []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}},
		GidMappingsEnableSetgroups: false,
		AmbientCaps:                []uintptr{unix.CAP_SYS_ADMIN},
	}
}

// userNamespaceError words a failure to start a process in a user
// namespace of its own, naming the kernel's settings that forbid it.
func userNamespaceError(err error) error {
	if errors.Is(err, unix.EPERM) || errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EINVAL) {
		var why []string
		for _, f := range []string{"/proc/sys/kernel/unprivileged_userns_clone", "/proc/sys/user/max_user_namespaces", "/proc/sys/kernel/apparmor_restrict_unprivileged_userns"} {
			if b, err := os.ReadFile(f); err == nil {
				why = append(why, fmt.Sprintf("%s = %s", strings.TrimPrefix(f, "/proc/sys/"), strings.TrimSpace(string(b))))
			}
		}
		return fmt.Errorf("creating a user namespace is not permitted (%v; %s)", err, strings.Join(why, ", "))
	}
	return err
}

// nsError words a failure to start a namespace's keeper.
func nsError(err error) error {
	if errors.Is(err, unix.EPERM) {
		return errors.New("creating a PID namespace is not permitted (it needs CAP_SYS_ADMIN: run as root)")
	}
	return err
}

// notChrooted fails when this process runs under chroot: joining the
// job's mount namespace would move a rank to that namespace's real root,
// out of the chroot.
func notChrooted() error {
	root, err := os.Readlink("/proc/self/root")
	if err != nil {
		return fmt.Errorf("cannot read /proc/self/root: %w", err)
	}
	if root != "/" {
		return fmt.Errorf("amdrun runs under chroot (%s)", root)
	}
	return nil
}

// nsInode is the inode number that identifies this process's namespace
// of the given kind ("mnt", "pid").
func nsInode(kind string) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/ns/"+kind, &st); err != nil {
		return 0, fmt.Errorf("cannot read /proc/self/ns/%s: %w", kind, err)
	}
	return st.Ino, nil
}

// startKeeper starts o.self as the keeper, the init of the namespaces
// sys creates for the job, with the keeper's own arguments args, keeping
// o.hold open until the namespace is empty and then, should amdrun be
// gone, removing o.errDir. It fails when the namespaces are not permitted
// here (the caller words the error).
func startKeeper(o containOpts, sys *syscall.SysProcAttr, args ...string) (*keeper, error) {
	if err := notChrooted(); err != nil {
		return nil, err
	}
	mnt, err := nsInode("mnt")
	if err != nil {
		return nil, err
	}
	var p [3][2]*os.File // lifeline, status, requests: amdrun's end first
	if p[0][1], p[0][0], err = os.Pipe(); err == nil {
		if p[1][0], p[1][1], err = os.Pipe(); err == nil {
			p[2][0], p[2][1], err = socketPair()
		}
	}
	theirs := []*os.File{p[0][1], p[1][1], p[2][1]} // keeperLifeFD, keeperStatusFD, keeperReqFD
	defer closeFiles(theirs...)
	defer closeFiles(p[1][0])
	if err != nil {
		closeFiles(p[0][0], p[2][0])
		return nil, err
	}
	args = append([]string{o.self, KeeperArg, "--parent-mnt", strconv.FormatUint(mnt, 10), "--errors", o.errDir}, args...)
	// Its own group: a signal to amdrun's process group (kill -9 %1 in a
	// shell) must leave it to clean up. No parent-death signal: killed
	// with amdrun, the keeper would close the lease files before the
	// kernel has emptied its namespace (do_exit closes files first), and
	// for a moment a rank would run on devices no longer leased; its
	// lifeline's EOF has it empty the namespace first (issue 36.1).
	sys.Setpgid = true
	cmd := &exec.Cmd{Path: o.self, Args: args, ExtraFiles: append(theirs, o.hold...), SysProcAttr: sys}
	if err = cmd.Start(); err != nil {
		closeFiles(p[0][0], p[2][0])
		return nil, err
	}
	k := &keeper{cmd: cmd, lifeline: p[0][0], req: p[2][0], done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(k.done) }()
	closeFiles(theirs...)
	status, _ := bufio.NewReader(p[1][0]).ReadString('\n')
	if err := decodeKeeperStatus(status); err != nil {
		k.close()
		return nil, err
	}
	// Without a working directory (it was removed) the ranks start at the
	// namespace's root.
	k.cwd, _ = os.Getwd()
	return k, nil
}

// lost says how the keeper ended, once it has or is ending (the guards
// of its namespace die with it, a moment before it is reaped), and that
// the kernel took the job with it; "" while it runs.
func (k *keeper) lost() string {
	pid := k.cmd.Process.Pid
	select {
	case <-k.done:
	default:
		if !exiting(pid) {
			return ""
		}
		select {
		case <-k.done:
		case <-time.After(5 * time.Second):
		}
	}
	how := "ended"
	if st := k.cmd.ProcessState; st != nil {
		how = "exited with code " + strconv.Itoa(st.ExitCode())
		if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			how = "was killed by " + unix.SignalName(ws.Signal())
		}
	}
	return fmt.Sprintf("the job's keeper (pid %d) %s, and the kernel killed every process of the job with it", pid, how)
}

// exiting says whether pid has begun to exit (PF_EXITING in the flags of
// its /proc/PID/stat) or is gone.
func exiting(pid int) bool {
	const pfExiting = 0x4
	f, err := statFields(pid)
	if err != nil {
		return true
	}
	flags, err := strconv.ParseUint(f[6], 10, 64)
	return err == nil && flags&pfExiting != 0
}

// socketPair is a connected pair of Unix sequenced-packet sockets (each
// write one message), close-on-exec.
func socketPair() (*os.File, *os.File, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	return os.NewFile(uintptr(fds[0]), "keeper requests"), os.NewFile(uintptr(fds[1]), "keeper requests"), nil
}

// sweepOrphans has the keeper kill the processes that came to it, ranks
// whose guard died and all they started: in the job's namespace only the
// keeper is a reaper besides the guards, which are amdrun's children.
func (k *keeper) sweepOrphans() {
	_, _ = k.lifeline.Write([]byte{keeperSweep})
}

// guardHeld is none: the keeper holds the files for the whole job.
func (k *keeper) guardHeld() []*os.File { return nil }

// outerPID finds pid among the children of parent (0: the keeper).
func (k *keeper) outerPID(parent, pid int) int {
	if parent == 0 {
		parent = k.cmd.Process.Pid
	}
	return hostPID(parent, pid)
}

// close tells the keeper the job is over and waits until it has emptied
// the namespace and exited. Calling it again does nothing more.
func (k *keeper) close() {
	k.lifeline.Close()
	<-k.done
	k.req.Close()
}

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
	ents, err := readProcDir("")
	if err != nil {
		return false
	}
	self := os.Getpid()
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		b, err := readProc(e.Name() + "/stat")
		if err != nil {
			continue // gone
		}
		if state := statState(b); state != 'Z' && state != 'X' {
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
	self := os.Getpid()
	for {
		// No child left means no descendant left (it would hang under
		// one): the usual end, found without reading /proc.
		if reapAll(f) {
			return
		}
		for _, p := range descendants(self) {
			_ = unix.Kill(p, unix.SIGKILL)
		}
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
	ents, _ := readProcDir("")
	tree := map[int][]int{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, ok := parentOf(pid); ok {
			tree[ppid] = append(tree[ppid], pid)
		}
	}
	return tree
}

// parentOf reads pid's parent from /proc/PID/stat.
func parentOf(pid int) (int, bool) {
	b, err := readProc(fmt.Sprintf("%d/stat", pid))
	if err != nil {
		return 0, false
	}
	return statParent(b)
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
	for _, l := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(l, "NSpid:"); ok {
			f := strings.Fields(v)
			if len(f) == 0 {
				return 0
			}
			n, _ := strconv.Atoi(f[len(f)-1])
			return n
		}
	}
	return 0
}
