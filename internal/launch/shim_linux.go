package launch

import (
	"fmt"
	"os"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/amdrun/amdrun/internal/topology"
)

// Memory policy modes of set_mempolicy(2) (linux/mempolicy.h); x/sys/unix
// does not export them.
const (
	mpolPreferred = 1
	mpolBind      = 2
)

// ShimMain is the bind shim: args are what follows ShimArg on the command
// line, "--cpus LIST --mems LIST --mempolicy bind|preferred|none -- argv...".
// It binds the calling thread (sched_setaffinity, set_mempolicy; both
// survive execve) and replaces the process with argv, found on PATH, with
// the process's environment. It returns only on failure: 2 for bad
// arguments, 1 when binding fails, 127 when the command is not found and
// 126 when it cannot be executed, after a one-line message on stderr.
func ShimMain(args []string) int {
	// Affinity and memory policy are per thread; the exec must happen on
	// the thread that was bound.
	runtime.LockOSThread()
	sa, err := parseShimArgs(args)
	if err != nil {
		fmt.Fprintf(os.Stderr, "amdrun bind: %v\n", err)
		return 2
	}
	if len(sa.cpus) > 0 {
		var set unix.CPUSet
		for _, c := range sa.cpus {
			if c >= len(set)*64 {
				fmt.Fprintf(os.Stderr, "amdrun bind: cpu %d is beyond the %d CPUs supported\n", c, len(set)*64)
				return 1
			}
			set.Set(c)
		}
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			fmt.Fprintf(os.Stderr, "amdrun bind: sched_setaffinity cpus %s: %v\n", topology.FormatCPUList(sa.cpus), err)
			return 1
		}
	}
	if len(sa.mems) > 0 && sa.policy != MemNone {
		if err := setMempolicy(sa.policy, sa.mems); err != nil {
			fmt.Fprintf(os.Stderr, "amdrun bind: set_mempolicy %s nodes %s: %v\n", sa.policy, topology.FormatCPUList(sa.mems), err)
			return 1
		}
	}
	path, err := lookPath(sa.argv[0], os.Getenv("PATH"))
	if err != nil {
		fmt.Fprintf(os.Stderr, "amdrun bind: %v\n", err)
		return execFailureCode(err)
	}
	err = unix.Exec(path, sa.argv, os.Environ())
	fmt.Fprintf(os.Stderr, "amdrun bind: exec %s: %v\n", path, err)
	return execFailureCode(err)
}

// setMempolicy sets the calling thread's memory policy to nodes.
func setMempolicy(p MemPolicy, nodes []int) error {
	mode := mpolBind
	if p == MemPreferred {
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
