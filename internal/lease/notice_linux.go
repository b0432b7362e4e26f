package lease

import (
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// noticePrefix+boot id marks the degraded-mode notice printed this boot
// (issue 31).
const noticePrefix = ".amdrun-noticed-"

const bootIDPath = "/proc/sys/kernel/random/boot_id"

// notice says whether a job prints the degraded-mode line: in a Shared
// directory once per boot once another user has left files there; in an
// Owned one always.
func (d *Dir) notice() bool {
	if d.mode != Shared {
		return true
	}
	if !d.othersUsed() {
		return false
	}
	id, err := os.ReadFile(bootIDPath)
	name := noticePrefix + strings.TrimSpace(string(id))
	if err != nil || strings.ContainsAny(name, "/\x00") || len(name) > 200 {
		return true
	}
	fd, err := unix.Openat(d.fd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0o644)
	if err == unix.EEXIST {
		return false
	}
	if err == nil {
		_ = unix.Fchmod(fd, 0o644)
		unix.Close(fd)
	}
	return true
}

// othersUsed reports whether a user but this one and root owns the
// directory or anything in it or its queue.
func (d *Dir) othersUsed() bool {
	other := func(uid uint32) bool { return int(uid) != d.euid && uid != 0 }
	return d.owner < 0 || other(uint32(d.owner)) || othersIn(d.fd, d.path, other, true)
}

// othersIn reports whether other owns an entry of dfd (or, with queue, of
// its queue), or the entries cannot be read.
func othersIn(dfd int, path string, other func(uint32) bool, queue bool) bool {
	ents, err := names(dfd, path)
	if err != nil {
		return true
	}
	for _, n := range ents {
		var st unix.Stat_t
		if unix.Fstatat(dfd, n, &st, unix.AT_SYMLINK_NOFOLLOW) != nil || other(st.Uid) {
			return true
		}
		if !queue || n != queueDir || st.Mode&unix.S_IFMT != unix.S_IFDIR {
			continue
		}
		qfd, err := unix.Openat(dfd, n, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return true
		}
		found := othersIn(qfd, path, other, false)
		unix.Close(qfd)
		if found {
			return true
		}
	}
	return false
}
