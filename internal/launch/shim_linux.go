package launch

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/amdrun/amdrun/internal/plan"
	"github.com/amdrun/amdrun/internal/topology"
)

// set_mempolicy(2) modes, which x/sys/unix lacks.
const (
	mpolPreferred = 1
	mpolBind      = 2
)

// ShimMain is the bind shim (args after ShimArg: see parseShimArgs): it
// binds the calling thread (affinity and memory policy survive fork and
// execve) and execs argv, found on PATH, or with --guard stays as the
// rank's guard. It returns only on failure, after a line on stderr: 2 for
// bad arguments, 1 when binding fails, 127 when the command is not found,
// 126 when it cannot be run.
func ShimMain(args []string) int {
	runtime.LockOSThread() // the binding is the thread's
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

// guardSetup: only 0, 1 and 2 may reach the rank (with a lease file it
// could release the lease; issue 36.1), amdrun's signals must not take the
// guard away, and no process of the user may ptrace it (issue 26).
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

func setMempolicy(p plan.MemPolicy, nodes []int) error {
	mode := mpolBind
	if p == plan.MemPreferred {
		mode = mpolPreferred
	}
	mask := make([]uint64, slices.Max(nodes)/64+1)
	for _, n := range nodes {
		mask[n/64] |= 1 << (n % 64)
	}
	mask = append(mask, 0) // the kernel reads maxnode-1 bits
	_, _, errno := unix.Syscall(unix.SYS_SET_MEMPOLICY, uintptr(mode),
		uintptr(unsafe.Pointer(&mask[0])), uintptr(len(mask)*64))
	runtime.KeepAlive(mask)
	if errno != 0 {
		return errno
	}
	return nil
}

// cloexecFrom marks every descriptor from fd on close-on-exec
// (close_range needs Linux 5.11).
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

// dropSignals drops the signals amdrun forwards itself, and SIGPIPE; one
// ignored at start stays so for the rank (as under nohup).
func dropSignals() {
	signal.Notify(make(chan os.Signal, 1), notified(append(slices.Clone(DefaultSignals), unix.SIGPIPE))...)
}

// guard runs the rank (proto_linux.go): when it exits, it kills and reaps
// all the rank left, reports msgStatus and exits with the rank's code;
// when amdrun dies first, it does the same and removes the error files.
func guard(path string, sa *shimArgs) int {
	ctl, rep := os.NewFile(guardCtlFD, "control"), os.NewFile(guardReportFD, "report")
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
	_, _ = rep.Write(guardMsg{Kind: msgPid, Pid: pid}.encode())
	status, ok := watchRank(pid, ctl, chld)
	_ = unix.Kill(-pid, unix.SIGKILL)
	sweep(chld)
	if !ok { // amdrun is gone: so is the job
		abandonErrorFile()
		return 1
	}
	_, _ = rep.Write(guardMsg{Kind: msgStatus, Status: syscall.WaitStatus(status)}.encode())
	if status.Signaled() {
		return 128 + int(status.Signal())
	}
	return status.ExitStatus()
}

// startRank starts the rank in a group (or session) of its own, Pdeathsig set.
func startRank(path string, argv []string) (int, error) {
	sys := &syscall.SysProcAttr{
		Setpgid:   true,
		Pdeathsig: syscall.SIGKILL, // this thread lives as long as the guard (golang/go#27505)
	}
	if onTerminal() {
		// Not its controlling terminal: reading or writing it never stops
		// the rank (SIGTTIN, SIGTTOU); amdrun forwards Ctrl-C (issue 15).
		sys.Setpgid, sys.Setsid = false, true
	}
	return syscall.ForkExec(path, argv, &syscall.ProcAttr{
		Env:   os.Environ(),
		Files: []uintptr{0, 1, 2},
		Sys:   sys,
	})
}

// watchRank relays amdrun's control bytes until the rank exits; ok is
// false when the control pipe closed first.
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

// onTerminal says whether a standard stream is a terminal (see Run).
func onTerminal() bool {
	for fd := 0; fd < 3; fd++ {
		if _, err := unix.IoctlGetTermios(fd, unix.TCGETS); err == nil {
			return true
		}
	}
	return false
}

// abandonErrorFile removes the error files amdrun, gone, will not read
// (none without EnvErrorFile: "." is no error directory).
func abandonErrorFile() { removeErrorDirPath(filepath.Dir(os.Getenv(EnvErrorFile))) }

// OwnCPUs returns the CPUs this process may run on (sched_getaffinity: a
// cgroup, taskset or Slurm step may narrow them); nil when unknown.
func OwnCPUs() []int {
	var cs unix.CPUSet
	if err := unix.SchedGetaffinity(0, &cs); err != nil {
		return nil
	}
	var cpus []int
	for cpu := 0; cpu < len(cs)*64; cpu++ {
		if cs.IsSet(cpu) {
			cpus = append(cpus, cpu)
		}
	}
	return cpus
}
