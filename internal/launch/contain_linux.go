package launch

import (
	"bufio"
	"cmp"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

type keeper struct {
	cmd      *exec.Cmd
	lifeline *os.File // closed (or amdrun dead): empty the namespace
	// cwd is amdrun's working directory: entering a mount namespace moves
	// the thread to its root.
	cwd  string
	done chan struct{}
	req  *os.File   // start requests (userNamespace)
	mu   sync.Mutex // one request at a time on req
}

// openContainment sets up the mode want (ContainAuto: the strongest here)
// for one Run; one named but not permitted is an ErrContainment.
func openContainment(want Containment, o containOpts) (container, error) {
	if want == ContainAuto {
		c, _, why := openAuto(o)
		if c == nil {
			return nil, why
		}
		return c, nil // why a stronger mode was refused is doctor's to say
	}
	m := modeNamed(want)
	if m == nil {
		return nil, fmt.Errorf("launch: unknown containment %q", string(want))
	}
	o.asked = true
	c, err := m.open(o)
	if err != nil {
		err = fmt.Errorf("launch: %w: %w", ErrContainment, err)
	}
	return c, err
}

// openAuto opens the first mode permitted here, by auto order; why says
// why each stronger one is not. c is nil when none is permitted.
func openAuto(o containOpts) (c container, name Containment, why error) {
	for _, m := range modes {
		if m.auto == 0 {
			continue
		}
		c, err := m.open(o)
		if err == nil {
			return c, m.name, why
		}
		if why != nil {
			err = fmt.Errorf("%w; %w", why, err)
		}
		why = err
	}
	return nil, ContainAuto, why
}

// ProbeContainment sets up and ends the mode Run would choose here (for
// `amdrun doctor`), saying why each stronger one is not permitted.
func ProbeContainment(self string) (Containment, error) {
	c, name, why := openAuto(containOpts{self: self, note: func(string) {}})
	if c != nil {
		c.close()
	}
	return name, why
}

// notChrooted fails under chroot: joining the job's mount namespace would
// move a rank to that namespace's real root.
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

// nsInode is the inode of this process's namespace of kind ("mnt", ...).
func nsInode(kind string) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/ns/"+kind, &st); err != nil {
		return 0, fmt.Errorf("cannot read /proc/self/ns/%s: %w", kind, err)
	}
	return st.Ino, nil
}

// startKeeper starts o.self as the keeper, the init of the namespaces sys
// makes, holding o.hold until its namespace is empty; it fails when the
// namespaces are not permitted (the caller words the error).
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
	// Its own group: kill -9 %1 in a shell must leave it to clean up. No
	// parent-death signal: killed with amdrun, it would close the lease
	// files before the kernel emptied its namespace (issue 36.1).
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
	k.cwd, _ = os.Getwd() // none (removed): the namespace's root
	return k, nil
}

// lost says how the keeper ended, taking the job with it, once it has or
// is ending (its guards die a moment before it is reaped); "" while it runs.
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

// exiting says whether pid has begun to exit (PF_EXITING) or is gone.
func exiting(pid int) bool {
	const pfExiting = 0x4
	f, err := statFields(pid)
	if err != nil {
		return true
	}
	flags, err := strconv.ParseUint(f[6], 10, 64)
	return err == nil && flags&pfExiting != 0
}

// socketPair is a connected close-on-exec pair of SOCK_SEQPACKET sockets.
func socketPair() (*os.File, *os.File, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	return os.NewFile(uintptr(fds[0]), "keeper requests"), os.NewFile(uintptr(fds[1]), "keeper requests"), nil
}

func (k *keeper) guardHeld() []*os.File { return nil }

func (k *keeper) outerPID(parent, pid int) int {
	return hostPID(cmp.Or(parent, k.cmd.Process.Pid), pid)
}

// close ends the job and waits until the keeper has emptied it and exited.
func (k *keeper) close() {
	k.lifeline.Close()
	<-k.done
	k.req.Close()
}
