package launch

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/amdrun/amdrun/internal/plan"
	"github.com/amdrun/amdrun/internal/topology"
)

// Memory policy modes of set_mempolicy(2) (linux/mempolicy.h); x/sys/unix
// does not export them.
const (
	mpolPreferred = 1
	mpolBind      = 2
)

// ShimMain is the bind shim: args are what follows ShimArg on the command
// line, "--cpus LIST --mems LIST --mempolicy bind|preferred|none [--guard
// --hold N] -- argv...". It binds the calling thread
// (sched_setaffinity, set_mempolicy; both survive fork and execve) and
// replaces the process with argv, found on PATH, with the process's
// environment. It returns only on failure: 2 for bad arguments, 1 when
// binding fails, 127 when the command is not found and 126 when it cannot
// be executed, after a one-line message on stderr.
//
// With --guard it stays, as the rank's guard (see Containment and the
// protocol in proto_linux.go): guardCtlFD is its control pipe from
// amdrun, guardReportFD its report pipe to amdrun, and N files from
// guardHoldFD on are kept open until it exits. It makes itself not
// dumpable, so that no process of the same user can ptrace it. It starts
// argv as its child, in a process group of its own (a session of its own
// when one of its standard streams is a terminal), and reports msgPid; it
// reaps nothing until amdrun answers with ctlAck (so that amdrun can
// still find the rank's pid in its own namespace). A ctlSignal sends its
// signal to the rank's process group. When the rank exits, it SIGKILLs
// whatever the rank left, its process group and every other descendant,
// reaps them, reports msgStatus and exits with the rank's code
// (128+signal when it was killed). When the control pipe closes first
// (amdrun died), it does the same without waiting for the rank, and
// removes the rank's error file (TORCHELASTIC_ERROR_FILE) and, once
// empty, its directory.
func ShimMain(args []string) int {
	// Affinity and memory policy are per thread; the exec (or the fork of
	// the rank) must happen on the thread that was bound.
	runtime.LockOSThread()
	sa, err := parseShimArgs(args)
	if err == nil {
		lr, ok := os.LookupEnv("LOCAL_RANK")
		err = pickLocalRank(sa, lr, ok)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "amdrun bind: %v\n", err)
		return 2
	}
	if sa.guard {
		if err := guardSetup(); err != nil {
			fmt.Fprintf(os.Stderr, "amdrun guard: %v\n", err)
			return 1
		}
	}
	if err := bind(sa); err != nil {
		fmt.Fprintf(os.Stderr, "amdrun bind: %v\n", err)
		return 1
	}
	path, err := lookPath(sa.argv[0], os.Getenv("PATH"))
	if err != nil {
		fmt.Fprintf(os.Stderr, "amdrun bind: %v\n", err)
		return execFailureCode(err)
	}
	if sa.guard {
		return guard(path, sa)
	}
	err = unix.Exec(path, sa.argv, os.Environ())
	fmt.Fprintf(os.Stderr, "amdrun bind: exec %s: %v%s\n", path, err, limitHint(err))
	return execFailureCode(err)
}

// guardSetup is what a guard does before anything can fail: no
// descriptor but 0, 1 and 2 may reach the rank (its pipes and held files,
// and whatever a keeper or amdrun let through: with a lease file a rank
// could release its job's lease, with a report pipe end the job; issue
// 36.1), a signal meant for amdrun (pkill amdrun) must not take the guard
// away while its rank runs, and no process of the same user may ptrace
// it (issue 26: one that froze the guard's threads kept the job alive
// past amdrun's death). It keeps /proc open (keepProc).
func guardSetup() error {
	if err := cloexecFrom(guardCtlFD); err != nil {
		return err
	}
	if err := keepProc(); err != nil {
		return err
	}
	dropSignals()
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl PR_SET_DUMPABLE: %w", err)
	}
	return nil
}

// bind sets the calling thread's CPU affinity and memory policy as sa
// says.
func bind(sa *shimArgs) error {
	if len(sa.cpus) > 0 {
		var set unix.CPUSet
		for _, c := range sa.cpus {
			if c >= len(set)*64 {
				return fmt.Errorf("cpu %d is beyond the %d CPUs supported", c, len(set)*64)
			}
			set.Set(c)
		}
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			return fmt.Errorf("sched_setaffinity cpus %s: %w", topology.FormatCPUList(sa.cpus), err)
		}
	}
	if len(sa.mems) > 0 && sa.policy != plan.MemNone {
		if err := setMempolicy(sa.policy, sa.mems); err != nil {
			return fmt.Errorf("set_mempolicy %s nodes %s: %w", sa.policy, topology.FormatCPUList(sa.mems), err)
		}
	}
	return nil
}

// setMempolicy sets the calling thread's memory policy to nodes.
func setMempolicy(p plan.MemPolicy, nodes []int) error {
	mode := mpolBind
	if p == plan.MemPreferred {
		mode = mpolPreferred
	}
	top := 0
	for _, n := range nodes {
		top = max(top, n)
	}
	mask := make([]uint64, top/64+1)
	for _, n := range nodes {
		mask[n/64] |= 1 << (n % 64)
	}
	// The kernel reads maxnode-1 bits; one spare word keeps the top node.
	mask = append(mask, 0)
	_, _, errno := unix.Syscall(unix.SYS_SET_MEMPOLICY, uintptr(mode),
		uintptr(unsafe.Pointer(&mask[0])), uintptr(len(mask)*64))
	runtime.KeepAlive(mask)
	if errno != 0 {
		return errno
	}
	return nil
}

// cloexecFrom marks every descriptor from fd on close-on-exec: they stay
// open here and reach no program this process starts. close_range(2)
// does it in one call (Linux 5.11); older kernels get a loop over
// /proc/self/fd.
func cloexecFrom(fd int) error {
	err := unix.CloseRange(uint(fd), ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	if err != unix.ENOSYS && err != unix.EINVAL {
		return err
	}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return fmt.Errorf("listing open descriptors: %w", err)
	}
	for _, e := range ents {
		if n, err := strconv.Atoi(e.Name()); err == nil && n >= fd {
			unix.CloseOnExec(n)
		}
	}
	return nil
}

// dropSignals makes this process (a guard, a keeper) catch and drop the
// signals amdrun forwards to the ranks itself, and SIGPIPE. One it was
// started with ignored stays ignored, so that the rank inherits that too,
// as a rank of amdrun under nohup always did.
func dropSignals() {
	var sigs []os.Signal
	for _, sig := range append(append([]os.Signal(nil), DefaultSignals...), unix.SIGPIPE) {
		if !signal.Ignored(sig) {
			sigs = append(sigs, sig)
		}
	}
	signal.Notify(make(chan os.Signal, 1), sigs...)
}

// guard starts the rank (path, sa.argv) and watches over it; see
// ShimMain. It runs on the locked, bound thread.
func guard(path string, sa *shimArgs) int {
	ctl, rep := os.NewFile(guardCtlFD, "control"), os.NewFile(guardReportFD, "report")
	// Orphans of the rank's tree come to us, wherever they went.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fmt.Fprintf(os.Stderr, "amdrun guard: prctl PR_SET_CHILD_SUBREAPER: %v\n", err)
		return 1
	}
	chld := make(chan os.Signal, 1)
	signal.Notify(chld, unix.SIGCHLD)
	pid, err := startRank(path, sa.argv)
	if err != nil {
		fmt.Fprintf(os.Stderr, "amdrun bind: exec %s: %v%s\n", path, err, limitHint(err))
		return execFailureCode(err)
	}
	_ = sendReport(rep, guardMsg{Kind: msgPid, Pid: pid})
	status, ok := watchRank(pid, ctl, chld)
	// What the rank left in its group goes at once; then everything else
	// it started, wherever it went.
	_ = unix.Kill(-pid, unix.SIGKILL)
	sweep(nil, chld)
	if !ok { // amdrun is gone: so is the job
		abandonErrorFile()
		return 1
	}
	_ = sendReport(rep, guardMsg{Kind: msgStatus, Status: syscall.WaitStatus(status)})
	if status.Signaled() {
		return 128 + int(status.Signal())
	}
	return status.ExitStatus()
}

// startRank starts the rank as the guard's child, in a process group (or
// a session) of its own, with a parent-death signal.
func startRank(path string, argv []string) (int, error) {
	sys := &syscall.SysProcAttr{
		// The rank's own group: amdrun's signals reach its children too.
		Setpgid: true,
		// Should the guard itself be killed, the rank goes with it.
		// This thread lives as long as the guard (golang/go#27505).
		Pdeathsig: syscall.SIGKILL,
	}
	if onTerminal() {
		// A session of its own (and so a group of its own, as above): the
		// terminal is not its controlling one, so reading or writing it
		// never stops the rank (SIGTTIN, SIGTTOU with stty tostop), as
		// it would from a background group of amdrun's session; amdrun
		// stays in the foreground and forwards Ctrl-C (issue 15).
		sys.Setpgid, sys.Setsid = false, true
	}
	return syscall.ForkExec(path, argv, &syscall.ProcAttr{
		Env:   os.Environ(),
		Files: []uintptr{0, 1, 2},
		Sys:   sys,
	})
}

// watchRank relays amdrun's control bytes to the rank (pid) until it
// exits, and returns its wait status; ok is false when the control pipe
// closed first (amdrun is gone).
func watchRank(pid int, ctl *os.File, chld <-chan os.Signal) (status unix.WaitStatus, ok bool) {
	cmds := readBytes(ctl, 64)
	acked, done := false, false
	onReap := func(p int, ws unix.WaitStatus) {
		if p == pid {
			done, status = true, ws
		}
	}
	for !done {
		select {
		case b, open := <-cmds:
			if !open {
				return 0, false
			}
			if ack, sig := ctlDecode(b); ack {
				acked = true
				reapAll(onReap)
			} else {
				_ = unix.Kill(-pid, sig)
			}
		case <-chld:
			if acked {
				reapAll(onReap)
			}
		}
	}
	return status, true
}

// onTerminal says whether one of this process's standard streams is a
// terminal: amdrun hands a rank its terminal (see Run).
func onTerminal() bool {
	for fd := 0; fd < 3; fd++ {
		if _, err := unix.IoctlGetTermios(fd, unix.TCGETS); err == nil {
			return true
		}
	}
	return false
}

// abandonErrorFile removes the ranks' error files, which amdrun, gone,
// will not read, and their directory: the guards leave nothing behind.
func abandonErrorFile() {
	f := os.Getenv(EnvErrorFile)
	if f == "" {
		return
	}
	removeErrorDirPath(filepath.Dir(f))
}
