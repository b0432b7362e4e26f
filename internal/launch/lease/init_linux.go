package lease

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// CanInit says why this process cannot run Init (nil when it can): only
// root can make a directory no user can change.
func CanInit() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("lease: lease init must run as root: the lease directory and its lock files must belong to root, so that no user can remove them")
	}
	return nil
}

// initLockWait bounds how long Init waits for the node lock of a
// directory it replaces.
const initLockWait = 3 * time.Second

// Init makes path a root-prepared lease directory: owned by root, mode
// 0755, holding the node lock (.lock) and a lock file per key (root's,
// 0644, locked by jobs through read-only descriptors) and the queue
// (01777). It must run as root, and the directories above path must be
// changeable only by root (parents are made 0755 when missing). It is
// safe to run again: what is there and right is kept, missing lock files
// are made. Anything else at path (a directory another user owns or can
// write, a symlink, a file) is moved aside to path.untrusted-<time> and
// reported, unless a device is leased there now: then Init changes
// nothing and its error names the holders, since jobs in the old and the
// new directory would not see each other's leases.
func Init(path string, keys []string) (*InitReport, error) {
	if err := CanInit(); err != nil {
		return nil, err
	}
	if path == "" {
		return nil, fmt.Errorf("lease: empty lease directory path")
	}
	names, err := checkKeys(keys)
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("lease: %w", err)
	}
	parent, base := filepath.Dir(abs), filepath.Base(abs)
	if base == "/" || base == "." || base == ".." {
		return nil, fmt.Errorf("lease: %s: %w: not a directory name", abs, ErrUnsafe)
	}
	w, err := walk(parent, true, 0o755)
	if err != nil {
		return nil, err
	}
	defer w.close()
	if !steady(&w.st, 0) || w.st.Uid != 0 || w.unsafeAt != "" {
		at, by := parent, int(w.st.Uid)
		if w.unsafeAt != "" {
			at, by = w.unsafeAt, w.unsafeBy
		}
		return nil, fmt.Errorf("lease: %s: %w: %s can change %s, and so swap the lease directory; choose a directory whose parents only root can change",
			abs, ErrUnsafe, ownerName(by), at)
	}
	rep := &InitReport{Path: abs}
	var st unix.Stat_t
	err = unix.Fstatat(w.fd, base, &st, unix.AT_SYMLINK_NOFOLLOW)
	switch {
	case err == unix.ENOENT:
	case err != nil:
		return nil, fmt.Errorf("lease: %w", &fs.PathError{Op: "stat", Path: abs, Err: err})
	case st.Mode&unix.S_IFMT == unix.S_IFDIR && st.Uid == 0 && st.Mode&0o022 == 0:
		// Root's already: keep it and what it holds.
	default:
		if rep.MovedAside, err = moveAside(w.fd, parent, base, &st); err != nil {
			return nil, err
		}
	}
	if err := unix.Mkdirat(w.fd, base, 0o755); err != nil && err != unix.EEXIST {
		return nil, fmt.Errorf("lease: %w", &fs.PathError{Op: "mkdir", Path: abs, Err: err})
	}
	dfd, err := unix.Openat(w.fd, base, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("lease: %w", &fs.PathError{Op: "open", Path: abs, Err: err})
	}
	defer unix.Close(dfd)
	if err := unix.Fstat(dfd, &st); err != nil || st.Uid != 0 {
		return nil, fmt.Errorf("lease: %s: %w: not root's directory after making it", abs, ErrUnsafe)
	}
	if err := unix.Fchmod(dfd, 0o755); err != nil {
		return nil, fmt.Errorf("lease: %w", &fs.PathError{Op: "chmod", Path: abs, Err: err})
	}
	for _, n := range append([]string{nodeLock}, names...) {
		made, err := ensureLockFile(dfd, filepath.Join(abs, n), n)
		if err != nil {
			return nil, err
		}
		if made {
			rep.Made = append(rep.Made, n)
		} else {
			rep.Kept++
		}
	}
	if err := ensureQueue(dfd, filepath.Join(abs, queueDir)); err != nil {
		return nil, err
	}
	return rep, nil
}

// moveAside renames what is at base (st) in the parent directory pfd out
// of the way, refusing when a device is leased in it now. For a
// directory it holds that directory's node lock across the check and the
// rename, so that no job leases there in between (a job that takes the
// lock after the rename finds its directory moved: Dir.inPlace).
func moveAside(pfd int, parent, base string, st *unix.Stat_t) (string, error) {
	path := filepath.Join(parent, base)
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		old, err := Open(path, Options{})
		if err != nil {
			return "", fmt.Errorf("lease: cannot look into %s before moving it aside: %w", path, err)
		}
		defer old.Close()
		ctx, cancel := context.WithTimeout(context.Background(), initLockWait)
		unlock, err := old.Lock(ctx)
		cancel()
		if err != nil {
			return "", fmt.Errorf("lease: %s is in use: %w", path, err)
		}
		defer unlock()
		held, err := old.List()
		if err != nil {
			return "", err
		}
		var live []string
		for k, s := range held {
			if s.Fault == nil {
				live = append(live, fmt.Sprintf("%s by %s", k, s.Holder))
			}
		}
		if len(live) > 0 {
			return "", fmt.Errorf("lease: %s (owned by %s) has devices leased now (%s): moving it aside would let new jobs take them; run lease init again when they end",
				path, ownerName(int(st.Uid)), strings.Join(live, "; "))
		}
	}
	stamp := time.Now().Format("20060102T150405")
	for i := 0; ; i++ {
		aside := base + ".untrusted-" + stamp
		if i > 0 {
			aside += fmt.Sprintf("-%d", i)
		}
		err := unix.Renameat2(pfd, base, pfd, aside, unix.RENAME_NOREPLACE)
		if err == unix.EEXIST && i < 100 {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("lease: cannot move %s aside: %w", path, err)
		}
		return filepath.Join(parent, aside), nil
	}
}

// ensureLockFile makes name in the root-owned directory dfd a root-owned
// regular 0644 file with one link; made reports that it was created.
// Only root can have put anything there, so anything else is an error to
// look at, not to repair.
func ensureLockFile(dfd int, path, name string) (made bool, err error) {
	fd, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
	if err == nil {
		defer unix.Close(fd)
		if err := unix.Fchmod(fd, 0o644); err != nil {
			return false, fmt.Errorf("lease: %w", &fs.PathError{Op: "chmod", Path: path, Err: err})
		}
		return true, nil
	}
	if err != unix.EEXIST {
		return false, fmt.Errorf("lease: %w", &fs.PathError{Op: "create", Path: path, Err: err})
	}
	fd, err = unix.Openat(dfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		return false, fmt.Errorf("lease: %s: %w: %w; remove it and run lease init again", path, ErrUnsafe, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return false, fmt.Errorf("lease: %w", &fs.PathError{Op: "stat", Path: path, Err: err})
	}
	if kind := fileKind(st.Mode); kind != "" || st.Uid != 0 || st.Nlink != 1 {
		return false, fmt.Errorf("lease: %s: %w: not a root-owned regular file with one link; remove it and run lease init again", path, ErrUnsafe)
	}
	if st.Mode&0o7777 != 0o644 {
		if err := unix.Fchmod(fd, 0o644); err != nil {
			return false, fmt.Errorf("lease: %w", &fs.PathError{Op: "chmod", Path: path, Err: err})
		}
	}
	return false, nil
}

// ensureQueue makes DIR/queue a root-owned sticky directory every user
// can write.
func ensureQueue(dfd int, path string) error {
	if err := unix.Mkdirat(dfd, queueDir, 0o777); err != nil && err != unix.EEXIST {
		return fmt.Errorf("lease: %w", &fs.PathError{Op: "mkdir", Path: path, Err: err})
	}
	qfd, err := unix.Openat(dfd, queueDir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("lease: %s: %w: %w; remove it and run lease init again", path, ErrUnsafe, err)
	}
	defer unix.Close(qfd)
	var st unix.Stat_t
	if err := unix.Fstat(qfd, &st); err != nil || st.Uid != 0 {
		return fmt.Errorf("lease: %s: %w: not root's directory; remove it and run lease init again", path, ErrUnsafe)
	}
	if err := unix.Fchmod(qfd, 0o1777); err != nil {
		return fmt.Errorf("lease: %w", &fs.PathError{Op: "chmod", Path: path, Err: err})
	}
	return nil
}
