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
	// userns: the keeper is the init of a user namespace too
	// (ContainUserNamespace) and starts the guards itself over req.
	userns bool
	req    *os.File
	mu     sync.Mutex // one request at a time on req
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
		return errors.New("creating a PID namespace is not permitted (it needs CAP_SYS_ADMIN: run as root)")
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
// namespaces for the job (and of a user namespace with userns, started
// from f's thread: its parent-death signal fires when amdrun dies),
// keeping hold open until the namespace is empty and then, should amdrun
// be gone, removing errDir (the ranks' error files; "" for none). It
// fails when namespaces are not permitted here.
func startKeeper(self string, hold []*os.File, errDir string, userns bool, f *forker) (*keeper, error) {
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
	args := []string{self, KeeperArg, "--parent-mnt", strconv.FormatUint(mnt, 10), "--errors", errDir}
	// Its own group: a signal to amdrun's process group (kill -9 %1 in a
	// shell) must leave it to clean up.
	sys := &syscall.SysProcAttr{Cloneflags: unix.CLONE_NEWPID | unix.CLONE_NEWNS, Setpgid: true}
	if userns {
		args = append(args, "--userns")
		sys = userNamespaceAttr()
		// Killed with amdrun, even while another process of the user keeps
		// it stopped; the kernel then kills the whole namespace.
		sys.Setpgid, sys.Pdeathsig = true, syscall.SIGKILL
	}
	cmd := &exec.Cmd{Path: self, Args: args, ExtraFiles: append(theirs, hold...), SysProcAttr: sys}
	if userns {
		err = f.do(cmd.Start)
	} else {
		err = cmd.Start()
	}
	if err != nil {
		closeFiles(p[0][0], p[2][0])
		if userns {
			return nil, userNamespaceError(err, "")
		}
		return nil, nsError(err, "")
	}
	k := &keeper{cmd: cmd, lifeline: p[0][0], req: p[2][0], userns: userns, done: make(chan struct{})}
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
	if userns {
		return k, nil
	}
	dir := fmt.Sprintf("/proc/%d/ns/", cmd.Process.Pid)
	if k.pidNS, err = os.Open(dir + "pid"); err == nil {
		k.mntNS, err = os.Open(dir + "mnt")
	}
	if err != nil {
		k.close()
		return nil, err
	}
	return k, nil
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

// startGuard has the keeper start a guard (ContainUserNamespace) with
// argv and env in dir, its descriptors being files (stdin first when
// stdin is set, then stdout, stderr, control and report); it returns the
// guard's pid in the job's namespace.
func (k *keeper) startGuard(argv, env []string, dir string, stdin bool, files []*os.File) (int, error) {
	b, err := startRequest{Argv: argv, Env: env, Dir: dir, Stdin: stdin}.encode()
	if err != nil {
		return 0, err
	}
	fds := make([]int, len(files))
	for i, f := range files {
		fds[i] = int(f.Fd())
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if err := unix.Sendmsg(int(k.req.Fd()), b, unix.UnixRights(fds...), nil, 0); err != nil {
		return 0, fmt.Errorf("keeper: %w", err)
	}
	buf := make([]byte, 4096)
	n, _, _, _, err := unix.Recvmsg(int(k.req.Fd()), buf, nil, 0)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("keeper: no reply (%v)", err)
	}
	return decodeStartReply(buf[:n])
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
	k.req.Close()
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
// [--errors DIR] [--userns]". It makes the mount namespace it was started
// in a slave of its parent's (so that nothing mounted here shows outside)
// and mounts a /proc of the new PID namespace, so that a rank's pid and
// /proc/self agree. With --probe it exits there: 0 when that worked.
// Otherwise it speaks the protocol of proto_linux.go: it reports its
// set-up on keeperStatusFD and keeps the files from keeperHoldFD on open;
// it is not dumpable; it reaps the orphans that come to it and kills them
// (and all they started) on keeperSweep. With --userns (the init of a
// user namespace too) it drops the capability it was given to mount
// /proc, starts the guards amdrun asks for on keeperReqFD, and kills at
// once every other process that comes to it (a rank whose guard died).
// When its lifeline closes, it SIGKILLs every process of the namespace,
// over and over, until none is left, removes DIR (the ranks' error files,
// which amdrun, if it is still there, has read and removes anyway) and
// exits 0.
func KeeperMain(args []string) int {
	ka := keeperArgs(args)
	fail := func(err error) int {
		if ka.probe {
			fmt.Fprintf(os.Stderr, "%v\n", err)
		} else {
			_, _ = os.NewFile(keeperStatusFD, "status").Write(encodeKeeperStatus(err))
		}
		return 1
	}
	if !ka.probe {
		for fd := keeperLifeFD; fd <= keeperReqFD; fd++ {
			unix.CloseOnExec(fd)
		}
		if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
			return fail(fmt.Errorf("keeper: prctl PR_SET_DUMPABLE: %w", err))
		}
	}
	if err := nsSetup(ka.parentMnt); err != nil {
		return fail(err)
	}
	if ka.probe {
		return 0
	}
	if ka.userns {
		// The guards and ranks get no capability.
		if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
			return fail(fmt.Errorf("keeper: prctl PR_CAP_AMBIENT_CLEAR_ALL: %w", err))
		}
	}
	// Signals meant for amdrun (pkill amdrun, a terminal's) must not end
	// the keeper: amdrun forwards what the ranks should get.
	dropSignals()
	chld := make(chan os.Signal, 1)
	signal.Notify(chld, unix.SIGCHLD)
	status := os.NewFile(keeperStatusFD, "status")
	_, _ = status.Write(encodeKeeperStatus(nil))
	status.Close()
	keeperLoop(chld, ka.userns)
	removeErrorDir(ka.errDir)
	return 0
}

// keeperLoop serves the lifeline (and, with userns, the guards' start
// requests) until the lifeline closes, then empties the namespace.
func keeperLoop(chld <-chan os.Signal, userns bool) {
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
	reqs := make(chan keeperReq)
	if userns {
		go readStartRequests(reqs)
	}
	guards := map[int]bool{}
	for {
		select {
		case <-chld:
			reapAll(func(pid int, _ unix.WaitStatus) { delete(guards, pid) })
			if userns {
				killOrphans(guards)
			}
		case r := <-reqs:
			pid, err := r.start()
			if err == nil {
				guards[pid] = true
			}
			r.reply(pid, err)
		case b, open := <-cmds:
			if open {
				if b == keeperSweep {
					sweep(nil, chld)
				}
				continue
			}
			emptyNamespace(chld)
			return
		}
	}
}

// killOrphans SIGKILLs every child of the keeper that is not one of its
// guards, and all they started: a process whose guard died came here.
// Reaping them (the next SIGCHLD) brings their own children, and the
// next round.
func killOrphans(guards map[int]bool) {
	for _, c := range childrenNow(os.Getpid()) {
		if guards[c] {
			continue
		}
		for _, d := range descendants(c) {
			_ = unix.Kill(d, unix.SIGKILL)
		}
		_ = unix.Kill(c, unix.SIGKILL)
	}
}

// keeperReq is one start request as the keeper received it.
type keeperReq struct {
	r   startRequest
	fds []int
}

// readStartRequests reads start requests from keeperReqFD and hands them
// to reqs until amdrun closes its end.
func readStartRequests(reqs chan<- keeperReq) {
	buf := make([]byte, maxStartMsg)
	oob := make([]byte, unix.CmsgSpace(5*4))
	for {
		n, oobn, _, _, err := unix.Recvmsg(keeperReqFD, buf, oob, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil || n == 0 {
			return
		}
		var fds []int
		if msgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
			for _, m := range msgs {
				if got, err := unix.ParseUnixRights(&m); err == nil {
					fds = append(fds, got...)
				}
			}
		}
		r, err := decodeStartRequest(buf[:n])
		if err == nil && len(fds) != r.startFDs() {
			err = fmt.Errorf("start request with %d descriptors, want %d", len(fds), r.startFDs())
		}
		if err != nil {
			closeFDs(fds)
			keeperReq{}.reply(0, err)
			continue
		}
		reqs <- keeperReq{r: r, fds: fds}
	}
}

// start forks the guard the request asks for, in a process group of its
// own, and closes the descriptors that came with it.
func (q keeperReq) start() (int, error) {
	defer closeFDs(q.fds)
	files := q.fds
	if !q.r.Stdin {
		null, err := unix.Open(os.DevNull, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return 0, err
		}
		defer unix.Close(null)
		files = append([]int{null}, q.fds...)
	}
	attr := &syscall.ProcAttr{Dir: q.r.Dir, Env: q.r.Env, Sys: &syscall.SysProcAttr{Setpgid: true}}
	for _, fd := range files {
		attr.Files = append(attr.Files, uintptr(fd))
	}
	return syscall.ForkExec(q.r.Argv[0], q.r.Argv, attr)
}

// reply answers a start request with the guard's pid or the error.
func (keeperReq) reply(pid int, err error) {
	r := startReply{Pid: pid}
	if err != nil {
		r = startReply{Error: err.Error()}
	}
	_, _ = unix.Write(keeperReqFD, r.encode())
}

// closeFDs closes raw descriptors.
func closeFDs(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// keeperOpts is the keeper's command line.
type keeperOpts struct {
	probe, userns bool
	parentMnt     uint64
	errDir        string
}

// keeperArgs parses the keeper's command line (see KeeperMain).
func keeperArgs(args []string) keeperOpts {
	var o keeperOpts
	for i := 0; i < len(args); i++ {
		switch args[i] {
		case "--probe":
			o.probe = true
		case "--userns":
			o.userns = true
		case "--parent-mnt":
			if i+1 < len(args) {
				o.parentMnt, _ = strconv.ParseUint(args[i+1], 10, 64)
				i++
			}
		case "--errors":
			if i+1 < len(args) {
				o.errDir = args[i+1]
				i++
			}
		}
	}
	return o
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
	// The parent's /proc, still mounted, names the keeper by its pid there.
	outer, _ := os.Readlink("/proc/self")
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
		return fmt.Errorf("making the job's mounts private: %w", err)
	}
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mounting /proc for the job's PID namespace: %w", err)
	}
	spreadPIDs(outer)
	return nil
}

// pidStride spaces two jobs' pids: far more than the threads and
// processes a job makes before its first rank.
const pidStride = 64

// spreadPIDs starts the namespace's pids at the keeper's outer pid times
// pidStride (ns_last_pid), so two jobs on one host number their processes
// apart: torch's agent names a node by host and pid, and two agents both
// pid 3 in their namespaces hung a c10d rendezvous (issue 33). Best
// effort: a kernel without ns_last_pid keeps 1, 2, 3...
func spreadPIDs(outer string) {
	pid, err := strconv.Atoi(outer)
	b, _ := os.ReadFile("/proc/sys/kernel/pid_max")
	if pidMax, err2 := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && err2 == nil && pidMax > pidStride {
		_ = os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte(strconv.Itoa(pid*pidStride%pidMax)), 0)
	}
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

// childrenNow lists pid's children, from /proc.
func childrenNow(pid int) []int {
	if haveChildrenFiles() {
		return childrenOf(pid)
	}
	return processTree()[pid]
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
