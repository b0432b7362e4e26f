package lease

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// walked is the end of a path walk.
type walked struct {
	fd      int // the directory, O_RDONLY|O_DIRECTORY
	st      unix.Stat_t
	created bool
	// unsafeAt names a directory on the way that a user other than root
	// and the final directory's owner can change (unsafeBy); "" if none.
	unsafeAt string
	unsafeBy int
}

func (w *walked) close() { unix.Close(w.fd) }

// step is one directory on the way down.
type step struct {
	fd   int // O_PATH
	st   unix.Stat_t
	path string
}

// maxSymlinks bounds the symlinks one walk follows, as the kernel's 40.
const maxSymlinks = 40

// walk opens the directory at path one component at a time with
// O_NOFOLLOW, following a symlink only in a directory nobody but root and
// this user can change (safeLinkDir), never as the last component. With
// create, missing directories are made (the last leafPerm, others 0755);
// without, a missing one wraps fs.ErrNotExist. A refused symlink or
// non-directory wraps ErrUnsafe. Errors start with pfx, naming it what.
func walk(pfx, what, path string, create bool, leafPerm uint32) (*walked, error) {
	w := &walker{pfx: pfx, what: what, create: create, leafPerm: leafPerm}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, w.errorf("%w", err)
	}
	w.abs, w.parts = abs, splitPath(abs)
	defer w.close() // the one clean-up: every descriptor on the way
	err = w.start()
	for err == nil && len(w.parts) > 0 {
		err = w.next()
	}
	if err != nil {
		return nil, err
	}
	return w.finish()
}

// walker is one walk: the directories opened so far ("/" first, O_PATH)
// and the components to go.
type walker struct {
	pfx, what string // the errors' prefix, what the directory is
	abs       string
	parts     []string
	stack     []step
	create    bool
	leafPerm  uint32
	created   bool
	links     int
}

func (w *walker) errorf(format string, a ...any) error {
	return fmt.Errorf(w.pfx+": "+format, a...)
}

// MkdirAll opens the directory at path, making it (perm) and missing
// parents (0755) as walk does (--log-dir: issue 36.6, root made
// /etc/nologin through another user's link).
func MkdirAll(pfx, what, path string, perm uint32) (*os.File, error) {
	w, err := walk(pfx, what, path, true, perm)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(w.fd), filepath.Clean(path)), nil
}

func (w *walker) close() { w.popTo(0) }

// push keeps fd, already open, as the next directory.
func (w *walker) push(fd int, path string) error {
	s := step{fd: fd, path: path}
	if err := unix.Fstat(fd, &s.st); err != nil {
		unix.Close(fd)
		return w.errorf("%w", &fs.PathError{Op: "stat", Path: path, Err: err})
	}
	w.stack = append(w.stack, s)
	return nil
}

func (w *walker) popTo(n int) {
	for _, s := range w.stack[n:] {
		unix.Close(s.fd)
	}
	w.stack = w.stack[:n]
}

func (w *walker) start() error {
	fd, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return w.errorf("%w", &fs.PathError{Op: "open", Path: "/", Err: err})
	}
	return w.push(fd, "/")
}

// next takes one component: "..", a directory (made if asked), or a symlink.
func (w *walker) next() error {
	name := w.parts[0]
	w.parts = w.parts[1:]
	last := len(w.parts) == 0
	top := w.stack[len(w.stack)-1]
	if name == ".." {
		w.popTo(max(len(w.stack)-1, 1)) // "/.." is "/"
		return nil
	}
	p := filepath.Join(top.path, name)
	fd, err := w.open(top, name, p, last)
	switch {
	case err == unix.ENOTDIR || err == unix.ELOOP:
		return w.symlink(top, name, p, last)
	case err == unix.ENOENT:
		return w.errorf("%w", &fs.PathError{Op: "open", Path: p, Err: fs.ErrNotExist})
	case err != nil:
		return err
	}
	return w.push(fd, p)
}

// open opens the directory name in top, made first when missing and
// create: the raw errno to judge, or a wrapped error.
func (w *walker) open(top step, name, p string, last bool) (int, error) {
	const flags = unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	fd, err := unix.Openat(top.fd, name, flags, 0)
	if err == unix.ENOENT && w.create {
		perm := uint32(0o755)
		if last {
			perm = w.leafPerm
		}
		merr := unix.Mkdirat(top.fd, name, perm)
		if merr != nil && merr != unix.EEXIST { // another job may have just made it
			return -1, w.errorf("cannot create %s: %w", w.what, &fs.PathError{Op: "mkdir", Path: p, Err: merr})
		}
		w.created = w.created || (merr == nil && last)
		fd, err = unix.Openat(top.fd, name, flags, 0)
	}
	if err != nil && err != unix.ENOENT && err != unix.ENOTDIR && err != unix.ELOOP {
		return -1, w.errorf("%w", &fs.PathError{Op: "open", Path: p, Err: err})
	}
	return fd, err
}

// symlink judges a non-directory at name in top: a symlink it may follow
// (its target's components go first), else an error.
func (w *walker) symlink(top step, name, p string, last bool) error {
	var lst unix.Stat_t
	if unix.Fstatat(top.fd, name, &lst, unix.AT_SYMLINK_NOFOLLOW) != nil || lst.Mode&unix.S_IFMT != unix.S_IFLNK {
		return w.errorf("%s: %w: not a directory", p, ErrUnsafe)
	}
	if last {
		return w.errorf("%s: %w: %s is a symlink (owned by %s)", p, ErrUnsafe, w.what, ownerName(int(lst.Uid)))
	}
	if !safeLinkDir(&top.st, &lst) {
		return w.errorf("%s: %w: a symlink in %s, which %s can change: not followed",
			p, ErrUnsafe, top.path, ownerName(int(top.st.Uid)))
	}
	if w.links++; w.links > maxSymlinks {
		return w.errorf("%w", &fs.PathError{Op: "open", Path: w.abs, Err: unix.ELOOP})
	}
	target, err := readlinkat(top.fd, name)
	if err != nil {
		return w.errorf("%w", &fs.PathError{Op: "readlink", Path: p, Err: err})
	}
	w.parts = append(splitPath(target), w.parts...)
	if strings.HasPrefix(target, "/") {
		w.popTo(1)
	}
	return nil
}

// finish opens the last directory for reading and notes the first on
// the way that others could change.
func (w *walker) finish() (*walked, error) {
	if len(w.stack) < 2 {
		return nil, w.errorf("%w: / cannot be a %s", ErrUnsafe, w.what)
	}
	final := w.stack[len(w.stack)-1]
	fd, err := unix.Openat(final.fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, w.errorf("%w", &fs.PathError{Op: "open", Path: final.path, Err: err})
	}
	out := &walked{fd: fd, st: final.st, created: w.created}
	for _, s := range w.stack[:len(w.stack)-1] {
		if !steady(&s.st, final.st.Uid) {
			out.unsafeAt, out.unsafeBy = s.path, int(s.st.Uid)
			break
		}
	}
	return out, nil
}

// steady reports whether only root and owner can rename or replace the
// entries of directory st.
func steady(st *unix.Stat_t, owner uint32) bool {
	return (st.Uid == 0 || st.Uid == owner) && (st.Mode&0o022 == 0 || st.Mode&unix.S_ISVTX != 0)
}

// safeLinkDir reports whether a symlink (link) in the directory dir may be
// followed: only root and this user can have put it there.
func safeLinkDir(dir, link *unix.Stat_t) bool {
	me := uint32(os.Geteuid())
	return steady(dir, me) && (dir.Mode&0o022 == 0 || link.Uid == 0 || link.Uid == me)
}

func splitPath(p string) []string {
	return slices.DeleteFunc(strings.Split(p, "/"), func(s string) bool { return s == "" || s == "." })
}

func readlinkat(dirfd int, name string) (string, error) {
	for size := 256; size <= 1<<16; size *= 2 {
		buf := make([]byte, size)
		n, err := unix.Readlinkat(dirfd, name, buf)
		if err != nil {
			return "", err
		}
		if n < size {
			return string(buf[:n]), nil
		}
	}
	return "", unix.ENAMETOOLONG
}

// fileKinds names the file types fileKind knows, "" for a regular file.
var fileKinds = map[uint32]string{unix.S_IFREG: "", unix.S_IFLNK: "a symlink", unix.S_IFIFO: "a FIFO",
	unix.S_IFDIR: "a directory", unix.S_IFSOCK: "a socket", unix.S_IFCHR: "a device node", unix.S_IFBLK: "a device node"}

// fileKind names a file type that cannot be a lease file ("": regular).
func fileKind(mode uint32) string {
	if k, ok := fileKinds[mode&unix.S_IFMT]; ok {
		return k
	}
	return "not a regular file"
}
