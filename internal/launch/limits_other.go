//go:build !linux

package launch

// checkProcessRoom is Linux's (RLIMIT_NPROC counted from /proc).
func checkProcessRoom(int) error { return nil }
