package launch

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// userNamespace is ContainUserNamespace: pidNamespace in a user namespace
// of its own, whose keeper starts the guards (multithreaded amdrun cannot
// enter a user namespace).
type userNamespace struct{ *keeper }

func init() {
	register(containMode{name: ContainUserNamespace, auto: 2,
		open: func(o containOpts) (container, error) {
			k, err := startKeeper(o, userNamespaceAttr(), "--userns")
			if err != nil {
				return nil, userNamespaceError(err)
			}
			return userNamespace{k}, nil
		},
		doctor: []ModeLine{
			{"containment", "user-namespace: each job gets its own user and PID namespace, emptied when amdrun ends, however it ends", ""},
			{"guards", "not dumpable (no ptrace by the job); a rank whose guard is killed comes to the keeper, which kills it and all it started; the job cannot signal the keeper",
				"another process of the same user, outside the job, can ptrace the guards (the namespace is the user's)"},
			{"lease hold", "released once the job's namespace is empty", ""},
		}})
}

// startGuard has the keeper fork cmd, passing its descriptors.
func (n userNamespace) startGuard(cmd *exec.Cmd) (int, error) {
	stdin, _ := cmd.Stdin.(*os.File)
	b, err := startRequest{Argv: cmd.Args, Env: cmd.Env, Dir: n.cwd, Stdin: stdin != nil}.encode()
	if err != nil {
		return 0, err
	}
	var fds []int
	for _, f := range append([]*os.File{stdin, cmd.Stdout.(*os.File), cmd.Stderr.(*os.File)}, cmd.ExtraFiles...) {
		if f != nil {
			fds = append(fds, int(f.Fd()))
		}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := unix.Sendmsg(int(n.req.Fd()), b, unix.UnixRights(fds...), nil, 0); err != nil {
		return 0, fmt.Errorf("keeper: %w", err)
	}
	buf := make([]byte, 4096)
	got, _, _, _, err := unix.Recvmsg(int(n.req.Fd()), buf, nil, 0)
	if err != nil || got == 0 {
		return 0, fmt.Errorf("keeper: no reply (%v)", err)
	}
	return decodeStartReply(buf[:got])
}

// guardLost says the keeper killed the rank, unless it is gone and the
// kernel took the job with it (issue 36.3).
func (n userNamespace) guardLost(guard string, _ map[int]bool) string {
	if lost := n.lost(); lost != "" {
		return lost
	}
	return guard + "; the keeper killed the rank and all it started"
}

// userNamespaceAttr makes the init of a new user, PID and mount namespace,
// as this user, keeping CAP_SYS_ADMIN to mount its /proc.
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

// userNamespaceError names the kernel settings that forbid a user namespace.
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
