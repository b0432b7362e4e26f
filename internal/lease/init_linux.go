package lease

import (
	"cmp"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// CanInit says why this process cannot run Init (root only); nil when it can.
func CanInit() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("lease: lease init must run as root: the lease directory and its lock files must belong to root, so that no user can remove them")
	}
	return nil
}

// Init makes path a root-prepared lease directory (docs/shared-nodes.md):
// root's, 0755, with its marker, the node lock, a root 0644 lock file per
// key and the queue (01777). It runs as root, under directories only root
// can change. It only builds (issue 26): it makes the directory or adopts
// one (adoptable, adoptDegraded), and refuses anything else with an error
// wrapping ErrUnsafe (ErrBusy for a lock a job holds), changing nothing.
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
	parent, err := openInitParent(abs)
	if err != nil {
		return nil, err
	}
	defer parent.close()
	rep := &InitReport{Path: abs}
	dfd, err := openOrMake(parent.fd, abs, rep)
	if err != nil {
		return nil, err
	}
	defer unix.Close(dfd)
	if err := fill(dfd, abs, names, rep); err != nil {
		return nil, err
	}
	return rep, nil
}

// openInitParent opens abs's parent (making it), refusing one a user
// other than root could change (and so swap the lease directory).
func openInitParent(abs string) (*walked, error) {
	parent, base := filepath.Dir(abs), filepath.Base(abs)
	if base == "/" || base == "." || base == ".." {
		return nil, fmt.Errorf("lease: %s: %w: not a directory name", abs, ErrUnsafe)
	}
	w, err := walk("lease", "lease directory", parent, true, 0o755)
	if err != nil {
		return nil, err
	}
	if !steady(&w.st, 0) || w.st.Uid != 0 || w.unsafeAt != "" {
		at, by := parent, int(w.st.Uid)
		if w.unsafeAt != "" {
			at, by = w.unsafeAt, w.unsafeBy
		}
		w.close()
		return nil, fmt.Errorf("lease: %s: %w: %s can change %s, and so swap the lease directory; choose a directory whose parents only root can change",
			abs, ErrUnsafe, ownerName(by), at)
	}
	return w, nil
}

// openOrMake makes the lease directory abs in pfd, or opens and judges
// what is there (following no link).
func openOrMake(pfd int, abs string, rep *InitReport) (int, error) {
	base := filepath.Base(abs)
	if err := unix.Mkdirat(pfd, base, 0o755); err == nil {
		rep.Created = true
	} else if err != unix.EEXIST {
		return -1, fmt.Errorf("lease: %w", &fs.PathError{Op: "mkdir", Path: abs, Err: err})
	}
	dfd, err := unix.Openat(pfd, base, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		var st unix.Stat_t
		if serr := unix.Fstatat(pfd, base, &st, unix.AT_SYMLINK_NOFOLLOW); serr != nil {
			return -1, fmt.Errorf("lease: %w", &fs.PathError{Op: "open", Path: abs, Err: err})
		}
		return -1, notOurs(abs, &st, "")
	}
	if err := judge(dfd, abs, rep); err != nil {
		unix.Close(dfd)
		return -1, err
	}
	var st unix.Stat_t
	if rep.Adopted != "" && (unix.Fstat(dfd, &st) != nil || !stillNamed(pfd, base, &st)) {
		// Its owner renamed it before it became root's.
		unix.Close(dfd)
		return -1, fmt.Errorf("lease: %s: %w: the directory was moved while lease init adopted it; run lease init again", abs, ErrUnsafe)
	}
	return dfd, nil
}

// judge says whether the directory dfd is root's and, unless Init just
// made it, one it may adopt.
func judge(dfd int, abs string, rep *InitReport) error {
	var st unix.Stat_t
	if err := unix.Fstat(dfd, &st); err != nil {
		return fmt.Errorf("lease: %w", &fs.PathError{Op: "stat", Path: abs, Err: err})
	}
	switch {
	case rep.Created && st.Uid != 0:
		return fmt.Errorf("lease: %s: %w: not root's directory after making it", abs, ErrUnsafe)
	case rep.Created:
		return nil
	case st.Mode&0o002 != 0 && st.Mode&unix.S_IFMT == unix.S_IFDIR:
		return adoptDegraded(dfd, abs, &st, rep)
	case st.Uid != 0:
		return notOurs(abs, &st, "")
	}
	why, err := adoptable(dfd, abs, &st)
	return refusal(abs, &st, why, err)
}

// fill gives the directory dfd its mode, marker, node lock, a lock file
// per name and the queue, keeping what is right. It changes the mode only
// of what it made (issue 36.6): what it creates now, and all of a
// directory bearing its marker.
func fill(dfd int, abs string, names []string, rep *InitReport) error {
	var mst unix.Stat_t
	ours := rep.Created || unix.Fstatat(dfd, initMarker, &mst, unix.AT_SYMLINK_NOFOLLOW) == nil
	if err := ensureMode(dfd, abs, 0o755, ours); err != nil {
		return err
	}
	if _, err := ensureLockFile(dfd, filepath.Join(abs, initMarker), initMarker, ours); err != nil {
		return err
	}
	for _, n := range append([]string{nodeLock}, names...) {
		made, err := ensureLockFile(dfd, filepath.Join(abs, n), n, ours)
		if err != nil {
			return err
		}
		if made {
			rep.Made = append(rep.Made, n)
		} else {
			rep.Kept++
		}
	}
	return ensureQueue(dfd, filepath.Join(abs, queueDir), ours)
}

// ensureMode gives fd (path) mode when ours (Init made it), else refuses.
func ensureMode(fd int, path string, mode uint32, ours bool) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("lease: %w", &fs.PathError{Op: "stat", Path: path, Err: err})
	}
	if st.Mode&0o7777 == mode {
		return nil
	}
	if !ours {
		return fmt.Errorf("lease: %s: %w: mode %04o, not %04o, and lease init did not make it; lease init changes nothing there: chmod %04o it yourself, or choose another --lease-dir",
			path, ErrUnsafe, st.Mode&0o7777, mode, mode)
	}
	if err := unix.Fchmod(fd, mode); err != nil {
		return fmt.Errorf("lease: %w", &fs.PathError{Op: "chmod", Path: path, Err: err})
	}
	return nil
}

// initMarker is the file by which Init knows a directory as one it made.
const initMarker = ".amdrun-lease-dir"

// adoptable says why the directory dfd (st) is not one Init may fill.
func adoptable(dfd int, path string, st *unix.Stat_t) (string, error) {
	if st.Mode&0o022 != 0 {
		return "other users can write it", nil
	}
	ents, err := names(dfd, path)
	if err != nil {
		return "", err
	}
	var foreign []string
	for _, n := range ents {
		_, isKey := KeyFromFileName(n)
		if n != initMarker && n != nodeLock && n != queueDir && !isKey {
			foreign = append(foreign, n)
		}
	}
	if len(foreign) > 0 {
		slices.Sort(foreign)
		more := ""
		if len(foreign) > 3 {
			more = fmt.Sprintf(" and %d more", len(foreign)-3)
			foreign = foreign[:3]
		}
		return fmt.Sprintf("it holds files lease init does not make (%s%s)", strings.Join(foreign, ", "), more), nil
	}
	return "", nil
}

// notOurs is Init's refusal of what it found at path (st); why may be "".
func notOurs(path string, st *unix.Stat_t, why string) error {
	kind := cmp.Or(fileKind(st.Mode), "a regular file")
	if why != "" {
		why = ": " + why
	}
	return fmt.Errorf("lease: %s: %w: %s owned by %s, mode %04o, that lease init did not make%s; lease init changes nothing there: choose another --lease-dir, or remove or move it yourself if nothing needs it",
		path, ErrUnsafe, kind, ownerName(int(st.Uid)), st.Mode&0o7777, why)
}

// ensureLockFile makes name in dfd a root 0644 regular file with one
// link (made: it created it); anything else is an error.
func ensureLockFile(dfd int, path, name string, ours bool) (made bool, err error) {
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
	return false, ensureMode(fd, path, 0o644, ours)
}

// ensureQueue makes DIR/queue root's sticky directory every user can write.
func ensureQueue(dfd int, path string, ours bool) error {
	err := unix.Mkdirat(dfd, queueDir, 0o777)
	if err != nil && err != unix.EEXIST {
		return fmt.Errorf("lease: %w", &fs.PathError{Op: "mkdir", Path: path, Err: err})
	}
	ours = ours || err == nil
	qfd, err := unix.Openat(dfd, queueDir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("lease: %s: %w: %w; remove it and run lease init again", path, ErrUnsafe, err)
	}
	defer unix.Close(qfd)
	var st unix.Stat_t
	if err := unix.Fstat(qfd, &st); err != nil || st.Uid != 0 {
		return fmt.Errorf("lease: %s: %w: not root's directory; remove it and run lease init again", path, ErrUnsafe)
	}
	return ensureMode(qfd, path, 0o1777, ours)
}
