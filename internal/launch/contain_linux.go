package launch

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
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

// keeper is the init of a job's PID namespace, as amdrun sees it.
type keeper struct {
	cmd *exec.Cmd
	// lifeline is the write end of the keeper's pipe: closing it, or
	// amdrun's death, makes the keeper empty the namespace and exit.
	lifeline *os.File
	// pidNS and mntNS are the namespaces a rank's guard is started in.
	pidNS, mntNS *os.File
	// cwd is amdrun's working directory: entering a mount namespace moves
	// the thread to its root, and the ranks must start where amdrun runs.
	cwd  string
	done chan struct{}
}

// ProbeContainment reports the containment Run chooses by default on this
// node (for `amdrun doctor`): ContainPIDNamespace when self (amdrun's
// binary) can be started as the init of new PID and mount namespaces and
// mount a /proc there, else ContainUserNamespace when it can do so in a
// user namespace of its own, else ContainSubreaper with the reason.
//
// With ContainUserNamespace the error says why the job gets no PID
// namespace of its own; with ContainSubreaper, why neither.
func ProbeContainment(self string) (Containment, error) {
	pidErr := probeNamespaces(self, false)
	if pidErr == nil {
		return ContainPIDNamespace, nil
	}
	if err := probeNamespaces(self, true); err != nil {
		return ContainSubreaper, fmt.Errorf("%w; %w", pidErr, err)
	}
	return ContainUserNamespace, pidErr
}

// probeNamespaces starts self as a keeper that only sets up its
// namespaces (PID and mount, and a user namespace with userns) and
// reports whether that worked.
func probeNamespaces(self string, userns bool) error {
	if err := notChrooted(); err != nil {
		return err
	}
	mnt, err := nsInode("mnt")
	if err != nil {
		return err
	}
	cmd := exec.Command(self, KeeperArg, "--probe", "--parent-mnt", strconv.FormatUint(mnt, 10))
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: unix.CLONE_NEWPID | unix.CLONE_NEWNS}
	if userns {
		cmd.SysProcAttr = userNamespaceAttr()
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		if userns {
			return userNamespaceError(err, stderr.String())
		}
		return nsError(err, stderr.String())
	}
	return nil
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
func userNamespaceError(err error, stderr string) error {
	if s := strings.TrimSpace(stderr); s != "" {
		return errors.New(s)
	}
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
func nsError(err error, stderr string) error {
	if errors.Is(err, unix.EPERM) {
		return errors.New("creating a PID namespace is not permitted (it needs CAP_SYS_ADMIN: run as root, or let the kernel permit user namespaces)")
	}
	if s := strings.TrimSpace(stderr); s != "" {
		return errors.New(s)
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

// startKeeper starts self as the keeper, the init of new PID and mount
// namespaces for the job, keeping hold open until the namespace is empty
// and then, should amdrun be gone, removing errDir (the ranks' error
// files; "" for none). It fails when namespaces are not permitted here.
func startKeeper(self string, hold []*os.File, errDir string) (*keeper, error) {
	if err := notChrooted(); err != nil {
		return nil, err
	}
	mnt, err := nsInode("mnt")
	if err != nil {
		return nil, err
	}
	lifeR, lifeW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	statR, statW, err := os.Pipe()
	if err != nil {
		lifeR.Close()
		lifeW.Close()
		return nil, err
	}
	defer statR.Close()
	cmd := &exec.Cmd{
		Path: self,
		Args: []string{self, KeeperArg, "--parent-mnt", strconv.FormatUint(mnt, 10), "--errors", errDir},
		// keeperLifeFD, keeperStatusFD, then the held files.
		ExtraFiles: append([]*os.File{lifeR, statW}, hold...),
		SysProcAttr: &syscall.SysProcAttr{
			Cloneflags: unix.CLONE_NEWPID | unix.CLONE_NEWNS,
			// Its own group: a signal to amdrun's process group (kill -9
			// %1 in a shell) must leave it to clean up.
			Setpgid: true,
		},
	}
	err = cmd.Start()
	lifeR.Close()
	statW.Close()
	if err != nil {
		lifeW.Close()
		return nil, nsError(err, "")
	}
	k := &keeper{cmd: cmd, lifeline: lifeW, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(k.done) }()
	status, _ := bufio.NewReader(statR).ReadString('\n')
	if err := decodeKeeperStatus(status); err != nil {
		k.close()
		return nil, err
	}
	dir := fmt.Sprintf("/proc/%d/ns/", cmd.Process.Pid)
	if k.pidNS, err = os.Open(dir + "pid"); err == nil {
		k.mntNS, err = os.Open(dir + "mnt")
	}
	if err != nil {
		k.close()
		return nil, err
	}
	// Without a working directory (it was removed) the ranks start at the
	// namespace's root.
	k.cwd, _ = os.Getwd()
	return k, nil
}

// join moves the calling thread into the job's namespaces, so that the
// processes it starts are members. The caller must hold the thread locked
// for good (runtime.LockOSThread, never unlocked): the thread is no
// longer like the others and must end with its goroutine.
func (k *keeper) join() error {
	// A mount namespace can only be entered by a thread with a file system
	// context of its own; Go's threads share one.
	if err := unix.Unshare(unix.CLONE_FS); err != nil {
		return fmt.Errorf("unshare: %w", err)
	}
	if err := unix.Setns(int(k.mntNS.Fd()), unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("entering the job's mount namespace: %w", err)
	}
	if err := unix.Setns(int(k.pidNS.Fd()), unix.CLONE_NEWPID); err != nil {
		return fmt.Errorf("entering the job's PID namespace: %w", err)
	}
	return nil
}

// sweepOrphans has the keeper kill the processes that came to it, ranks
// whose guard died and all they started: in the job's namespace only the
// keeper is a reaper besides the guards, which are amdrun's children.
func (k *keeper) sweepOrphans() {
	_, _ = k.lifeline.Write([]byte{keeperSweep})
}

// close tells the keeper the job is over and waits until it has emptied
// the namespace and exited. Calling it again does nothing more.
func (k *keeper) close() {
	k.lifeline.Close()
	<-k.done
	if k.pidNS != nil {
		k.pidNS.Close()
		k.pidNS = nil
	}
	if k.mntNS != nil {
		k.mntNS.Close()
		k.mntNS = nil
	}
}

// KeeperMain is the keeper, the init (pid 1) of a job's PID namespace:
// args are what follows KeeperArg, "--parent-mnt INODE [--probe]
// [--errors DIR]". It makes the mount namespace it was started in a slave
// of its parent's (so that nothing mounted here shows outside) and mounts
// a /proc of the new PID namespace, so that a rank's pid and /proc/self
// agree. With --probe it exits there: 0 when that worked. Otherwise it
// speaks the protocol of proto_linux.go: it reports its set-up on
// keeperStatusFD and keeps the files from keeperHoldFD on open; it is not
// dumpable; it reaps the orphans that come to it and kills them (and all
// they started) on keeperSweep; when its lifeline closes, it SIGKILLs
// every process of the namespace, over and over, until none is left,
// removes DIR (the ranks' error files, which amdrun, if it is still
// there, has read and removes anyway) and exits 0.
func KeeperMain(args []string) int {
	probe, parentMnt, errDir := keeperArgs(args)
	fail := func(err error) int {
		if probe {
			fmt.Fprintf(os.Stderr, "%v\n", err)
		} else {
			_, _ = os.NewFile(keeperStatusFD, "status").Write(encodeKeeperStatus(err))
		}
		return 1
	}
	if !probe {
		for fd := keeperLifeFD; fd <= keeperStatusFD; fd++ {
			unix.CloseOnExec(fd)
		}
		if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
			return fail(fmt.Errorf("keeper: prctl PR_SET_DUMPABLE: %w", err))
		}
	}
	if err := nsSetup(parentMnt); err != nil {
		return fail(err)
	}
	if probe {
		return 0
	}
	// Signals meant for amdrun (pkill amdrun, a terminal's) must not end
	// the keeper: amdrun forwards what the ranks should get.
	dropSignals()
	chld := make(chan os.Signal, 1)
	signal.Notify(chld, unix.SIGCHLD)
	status := os.NewFile(keeperStatusFD, "status")
	_, _ = status.Write(encodeKeeperStatus(nil))
	status.Close()
	cmds := make(chan byte, 16)
	go func() {
		r := bufio.NewReader(os.NewFile(keeperLifeFD, "lifeline"))
		for {
			b, err := r.ReadByte()
			if err != nil {
				close(cmds)
				return
			}
			cmds <- b
		}
	}()
	for {
		select {
		case <-chld:
			reapAll(nil)
		case b, open := <-cmds:
			if open {
				if b == keeperSweep {
					sweep(nil, chld)
				}
				continue
			}
			emptyNamespace(chld)
			removeErrorDir(errDir)
			return 0
		}
	}
}

// keeperArgs parses the keeper's command line (see KeeperMain).
func keeperArgs(args []string) (probe bool, parentMnt uint64, errDir string) {
	for i := 0; i < len(args); i++ {
		switch args[i] {
		case "--probe":
			probe = true
		case "--parent-mnt":
			if i+1 < len(args) {
				parentMnt, _ = strconv.ParseUint(args[i+1], 10, 64)
				i++
			}
		case "--errors":
			if i+1 < len(args) {
				errDir = args[i+1]
				i++
			}
		}
	}
	return probe, parentMnt, errDir
}

// nsSetup makes the calling process, which must be the init of a new PID
// namespace in a mount namespace other than parentMnt (amdrun's), the
// owner of a /proc of its own: its mounts become a slave of the parent's
// and a /proc of the PID namespace is mounted. Both checks keep a keeper
// or guard started by hand from mounting over the host's /proc.
func nsSetup(parentMnt uint64) error {
	if os.Getpid() != 1 {
		return errors.New("keeper: not the init of a new PID namespace")
	}
	if mnt, err := nsInode("mnt"); err != nil || mnt == parentMnt || parentMnt == 0 {
		return errors.New("keeper: not in a mount namespace of its own")
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
		return fmt.Errorf("making the job's mounts private: %w", err)
	}
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mounting /proc for the job's PID namespace: %w", err)
	}
	return nil
}

// emptyNamespace SIGKILLs every other process of the caller's PID
// namespace (kill -1 from its init reaches exactly those) and reaps its
// own children, round after round, until none of them is alive. A zombie
// whose parent is outside the namespace (the guard of a rank, once amdrun
// is dead, belongs to amdrun's reaper) holds nothing any more and is that
// parent's to reap; waiting for it could wait for ever.
func emptyNamespace(chld <-chan os.Signal) {
	for {
		err := unix.Kill(-1, unix.SIGKILL)
		reapAll(nil)
		if err == unix.ESRCH {
			return
		}
		if onlyZombies() {
			reapAll(nil) // those that died since are ours to reap
			return
		}
		nextRound(chld)
	}
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
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return false
	}
	self := os.Getpid()
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
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

// descendants lists every descendant of pid, parents before children,
// from /proc.
func descendants(pid int) []int {
	var children func(int) []int
	if haveChildrenFiles() {
		children = childrenOf
	} else {
		tree := processTree()
		children = func(p int) []int { return tree[p] }
	}
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

var childrenFiles = sync.OnceValue(func() bool {
	_, err := os.Stat("/proc/thread-self/children")
	return err == nil
})

// haveChildrenFiles says whether the kernel has /proc/PID/task/TID/children
// (CONFIG_PROC_CHILDREN); without it, descendants scans all of /proc.
func haveChildrenFiles() bool { return childrenFiles() }

// childrenOf lists pid's children from /proc/PID/task/*/children: a
// child belongs to the thread that forked it, or, reparented, to any
// thread of its new parent.
func childrenOf(pid int) []int {
	dir := fmt.Sprintf("/proc/%d/task/", pid)
	// Not filepath.Glob: it would list every task's directory to match
	// one name.
	tasks, _ := os.ReadDir(dir)
	var out []int
	for _, t := range tasks {
		b, err := os.ReadFile(dir + t.Name() + "/children")
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
	ents, _ := os.ReadDir("/proc")
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
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	return statParent(b)
}

// statState is the state letter of a /proc/PID/stat line (R, S, D, Z,
// ...); 0 if it cannot be read.
func statState(b []byte) byte {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 0
	}
	return b[i+2]
}

// statParent parses the parent pid out of a /proc/PID/stat line, "pid
// (comm) state ppid ...", where comm may hold spaces and parentheses.
func statParent(b []byte) (int, bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:]))
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
	var kids []int
	if haveChildrenFiles() {
		kids = childrenOf(guard)
	} else {
		kids = processTree()[guard]
	}
	for _, k := range kids {
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
