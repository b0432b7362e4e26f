package launch

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// pidNamespace is ContainPIDNamespace (root): one PID and mount namespace
// for the job, its init a keeper; the guards start from a joined thread.
type pidNamespace struct {
	*keeper
	pidNS, mntNS *os.File // the namespaces a guard is started in
}

func init() {
	register(containMode{name: ContainPIDNamespace, auto: 3,
		open: func(o containOpts) (container, error) {
			k, err := startKeeper(o, &syscall.SysProcAttr{Cloneflags: unix.CLONE_NEWPID | unix.CLONE_NEWNS})
			if err != nil {
				return nil, nsError(err)
			}
			n := &pidNamespace{keeper: k}
			dir := fmt.Sprintf("/proc/%d/ns/", k.cmd.Process.Pid)
			if n.pidNS, err = os.Open(dir + "pid"); err == nil {
				n.mntNS, err = os.Open(dir + "mnt")
			}
			if err != nil {
				n.close()
				return nil, err
			}
			return n, nil
		},
		doctor: []ModeLine{
			{"containment", "pid-namespace: each job gets its own PID namespace, emptied when amdrun ends, however it ends", ""},
			{"guards", "not dumpable (no ptrace by the job's user); a rank whose guard is killed comes to the keeper, which kills it and all it started", ""},
			{"lease hold", "released once the job's namespace is empty", ""},
		}})
}

func (n *pidNamespace) startGuard(cmd *exec.Cmd) (int, error) {
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: it joined the job's namespaces
		if err := n.join(); err != nil {
			started <- err
			return
		}
		cmd.Dir = n.cwd
		started <- cmd.Start()
	}()
	return 0, <-started
}

// guardLost has the keeper kill the orphans that came to it, unless it is
// gone and the kernel took the job with it (issue 36.3).
func (n *pidNamespace) guardLost(guard string, _ map[int]bool) string {
	if lost := n.lost(); lost != "" {
		return lost
	}
	_, _ = n.lifeline.Write([]byte{keeperSweep})
	return guard + "; amdrun had the keeper kill the rank and all it started"
}

// join moves the calling thread, locked for good, into the job's namespaces.
func (n *pidNamespace) join() error {
	// Entering a mount namespace needs a file system context of its own.
	if err := unix.Unshare(unix.CLONE_FS); err != nil {
		return fmt.Errorf("unshare: %w", err)
	}
	if err := unix.Setns(int(n.mntNS.Fd()), unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("entering the job's mount namespace: %w", err)
	}
	if err := unix.Setns(int(n.pidNS.Fd()), unix.CLONE_NEWPID); err != nil {
		return fmt.Errorf("entering the job's PID namespace: %w", err)
	}
	return nil
}

func (n *pidNamespace) close() {
	n.keeper.close()
	closeFiles(n.pidNS, n.mntNS)
}

func nsError(err error) error {
	if errors.Is(err, unix.EPERM) {
		return errors.New("creating a PID namespace is not permitted (it needs CAP_SYS_ADMIN: run as root)")
	}
	return err
}
