package launch

import (
	"fmt"
	"os"
	"os/exec"

	"golang.org/x/sys/unix"
)

// userNamespace is ContainUserNamespace (unprivileged, where the kernel
// permits user namespaces): the job in a user, PID and mount namespace of
// its own, whose init, a keeper, starts the guards (amdrun, multithreaded,
// cannot enter a user namespace). The job cannot signal the keeper (the
// kernel drops SIGKILL and SIGSTOP sent to a namespace's init from
// inside; the keeper ignores or drops every other signal), holds no
// capability on the thread it forks guards from, and a rank whose guard
// dies comes to the keeper, which kills it at once. Another process of
// the user outside the job can ptrace, stop or kill the keeper and the
// guards: the namespace is the user's.
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
		doctor: func(error) []ModeLine {
			return []ModeLine{
				{"containment", "user-namespace: each job gets its own user and PID namespace, emptied when amdrun ends, however it ends", ""},
				{"guards", "not dumpable (no ptrace by the job); a rank whose guard is killed comes to the keeper, which kills it and all it started; the job cannot signal the keeper",
					"another process of the same user, outside the job, can ptrace the guards (the namespace is the user's)"},
				{"lease hold", "released once the job's namespace is empty", ""},
			}
		}})
}

// startGuard has the keeper fork cmd in the job's user namespace, which
// amdrun cannot enter; it returns the guard's pid there.
func (n userNamespace) startGuard(cmd *exec.Cmd) (int, error) {
	var files []*os.File
	stdin, _ := cmd.Stdin.(*os.File)
	if stdin != nil {
		files = append(files, stdin)
	}
	files = append(files, cmd.Stdout.(*os.File), cmd.Stderr.(*os.File))
	files = append(files, cmd.ExtraFiles...)
	return n.request(cmd.Args, cmd.Env, n.cwd, stdin != nil, files)
}

// guardLost says the keeper killed the rank: it kills every orphan that
// comes to it at once, unless it is gone and the kernel took the job with
// it (issue 36.3).
func (n userNamespace) guardLost(guard string, _ map[int]bool) string {
	if lost := n.lost(); lost != "" {
		return lost
	}
	return guard + "; the keeper killed the rank and all it started"
}

// request has the keeper start a guard (userNamespace) with
// argv and env in dir, its descriptors being files (stdin first when
// stdin is set, then stdout, stderr, control and report); it returns the
// guard's pid in the job's namespace.
func (k *keeper) request(argv, env []string, dir string, stdin bool, files []*os.File) (int, error) {
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
