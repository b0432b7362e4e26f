package launch

// The keeper's own side (amdrun's is contain_linux.go).

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// KeeperMain is the keeper, the init of a job's PID namespace (args after
// KeeperArg: "--parent-mnt INODE [--errors DIR] [--userns]"). It mounts
// the namespace's /proc, speaks proto_linux.go's protocol, and when its
// lifeline closes kills every process of the namespace, removes DIR and
// exits 0.
func KeeperMain(args []string) int {
	ka := keeperArgs(args)
	status := os.NewFile(keeperStatusFD, "status")
	fail := func(err error) int {
		_, _ = status.Write(encodeKeeperStatus(err))
		return 1
	}
	runtime.LockOSThread() // capabilities are a thread's (issue 36.2)
	if err := cloexecFrom(keeperLifeFD); err != nil {
		return fail(fmt.Errorf("keeper: %w", err))
	}
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fail(fmt.Errorf("keeper: prctl PR_SET_DUMPABLE: %w", err))
	}
	if err := nsSetup(ka.parentMnt); err != nil {
		return fail(err)
	}
	if err := keepProc(); err != nil {
		return fail(fmt.Errorf("keeper: %w", err))
	}
	if ka.userns {
		if err := dropCaps(); err != nil {
			return fail(fmt.Errorf("keeper: %w", err))
		}
	}
	if err := keeperSignals(); err != nil {
		return fail(fmt.Errorf("keeper: %w", err))
	}
	chld := make(chan os.Signal, 1)
	signal.Notify(chld, unix.SIGCHLD)
	_, _ = status.Write(encodeKeeperStatus(nil))
	status.Close()
	keeperLoop(chld, ka.userns)
	removeErrorDirPath(ka.errDir)
	return 0
}

// faultSignals are those Go's runtime takes for its own fault even when
// os/signal relays them (it looks at si_code, which sigqueue(3) sets).
var faultSignals = []unix.Signal{unix.SIGILL, unix.SIGTRAP, unix.SIGBUS, unix.SIGFPE, unix.SIGSEGV, unix.SIGSTKFLT, unix.SIGSYS}

// keeperSignals makes the keeper deaf to every signal a rank, or a
// `pkill amdrun`, can send it (issue 36.3: `kill -SEGV 1` from a rank ended
// the job): the fault signals are ignored, every other one is dropped.
func keeperSignals() error {
	var sigs []os.Signal
	for n := 1; n < 65; n++ {
		sig := unix.Signal(n)
		if sig == unix.SIGKILL || sig == unix.SIGSTOP || (n >= 32 && n <= 34) || signal.Ignored(sig) {
			continue // 32-34 are the C library's and Go's runtime's own
		}
		sigs = append(sigs, sig)
	}
	signal.Notify(make(chan os.Signal, 1), sigs...)
	for _, sig := range faultSignals {
		act := kernelSigaction{handler: 1} // SIG_IGN
		if _, _, e := unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&act)), 0, 8, 0, 0); e != 0 {
			return fmt.Errorf("ignoring %s: %w", unix.SignalName(sig), e)
		}
	}
	return nil
}

// kernelSigaction is struct sigaction as rt_sigaction(2) reads it on amd64
// and arm64 (elsewhere the zero restorer reads as the empty mask).
type kernelSigaction struct {
	handler, flags, restorer uintptr
	mask                     uint64
}

// dropCaps empties the calling thread's capability sets: with the
// CAP_SYS_ADMIN it mounted /proc with, a rank could unmount it and blind
// the guards (issue 36.2). The caller forks from this thread only.
func dropCaps() error {
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl PR_CAP_AMBIENT_CLEAR_ALL: %w", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var none [2]unix.CapUserData
	if err := unix.Capset(&hdr, &none[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	return nil
}

// keeperLoop serves the lifeline and requests until it closes, then empties.
func keeperLoop(chld <-chan os.Signal, userns bool) {
	cmds := readBytes(os.NewFile(keeperLifeFD, "lifeline"), 16)
	reqs := make(chan keeperReq)
	if userns {
		go readStartRequests(reqs)
	}
	guards := map[int]bool{}
	for {
		select {
		case <-chld:
			reapAll(func(pid int, _ unix.WaitStatus) { delete(guards, pid) })
			if userns { // an orphan whose guard died came here
				killStrays(func(c int) bool { return guards[c] }, map[int]bool{})
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
					sweep(chld)
				}
				continue
			}
			emptyNamespace(chld)
			return
		}
	}
}

type keeperReq struct {
	r   startRequest
	fds []int
}

// readStartRequests hands keeperReqFD's requests to reqs until it closes.
func readStartRequests(reqs chan<- keeperReq) {
	buf := make([]byte, maxStartMsg)
	oob := make([]byte, unix.CmsgSpace(5*4))
	for {
		n, oobn, _, _, err := unix.Recvmsg(keeperReqFD, buf, oob, unix.MSG_CMSG_CLOEXEC)
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

// start forks the requested guard in a group of its own, closing its fds.
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

func (keeperReq) reply(pid int, err error) {
	r := startReply{Pid: pid}
	if err != nil {
		r = startReply{Error: err.Error()}
	}
	_, _ = unix.Write(keeperReqFD, r.encode())
}

func closeFDs(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

type keeperOpts struct {
	userns    bool
	parentMnt uint64
	errDir    string
}

// keeperArgs parses the keeper's command line (zero values: nsSetup refuses).
func keeperArgs(args []string) keeperOpts {
	var o keeperOpts
	fs := flag.NewFlagSet(KeeperArg, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.BoolVar(&o.userns, "userns", false, "")
	fs.Uint64Var(&o.parentMnt, "parent-mnt", 0, "")
	fs.StringVar(&o.errDir, "errors", "", "")
	_ = fs.Parse(args)
	return o
}

// nsSetup mounts a /proc of the calling process's new PID namespace, its
// mounts made a slave of amdrun's; it refuses unless it is that
// namespace's init in a mount namespace other than parentMnt (a keeper
// started by hand must not mount over the host's /proc).
func nsSetup(parentMnt uint64) error {
	if os.Getpid() != 1 {
		return errors.New("keeper: not the init of a new PID namespace")
	}
	if mnt, err := nsInode("mnt"); err != nil || mnt == parentMnt || parentMnt == 0 {
		return errors.New("keeper: not in a mount namespace of its own")
	}
	outer, _ := os.Readlink("/proc/self") // the parent's /proc, still mounted
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
		return fmt.Errorf("making the job's mounts private: %w", err)
	}
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mounting /proc for the job's PID namespace: %w", err)
	}
	spreadPIDs(outer)
	return nil
}

// pidStride spaces two jobs' pids: far more than a job makes before a rank.
const pidStride = 64

// spreadPIDs starts the namespace's pids at the keeper's outer pid times
// pidStride: two torch agents both pid 3 hung a c10d rendezvous (issue 33).
func spreadPIDs(outer string) {
	pid, err := strconv.Atoi(outer)
	b, _ := os.ReadFile("/proc/sys/kernel/pid_max")
	if pidMax, err2 := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && err2 == nil && pidMax > pidStride {
		_ = os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte(strconv.Itoa(pid*pidStride%pidMax)), 0)
	}
}

// emptyNamespace SIGKILLs every other process of the namespace and reaps,
// round after round, until none is alive (a zombie whose parent is outside
// is that parent's to reap).
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
