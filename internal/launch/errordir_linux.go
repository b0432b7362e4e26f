package launch

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// errorDir is the private directory of the ranks' error files
// (TORCHELASTIC_ERROR_FILE): a fresh one of amdrun's own, mode 0700 with
// a random name (mkdirat: never one that was there, nor a link planted
// under its name), in errorDirBase, removed at the end. A rank writes its
// error file through a path, following links as torch's open() does, so
// the path must not cross a directory another user could change (a
// shared --log-dir could be renamed by its owner); amdrun copies each
// error file into the log directory itself.
//
// amdrun reads and removes what is in it only relative to the descriptor
// it opened when it made it (openat, O_NOFOLLOW), only regular files of
// this user, and only the names it gives out (attempt_K.rank_L.json).
// Its name says which amdrun made it (pid and start time, then the random
// part), so that whatever is left of it says so: a guard killed between
// emptying it and removing it leaves a directory that still names its
// amdrun (an owner file inside, as before, did not: issue 26's CI run).
// However the job ends, the directory goes: amdrun removes it; when amdrun
// was killed, the last guard (ContainSubreaper) or the keeper
// (ContainPIDNamespace) removes it, and in ContainUserNamespace, whose
// guards die with amdrun, the next amdrun run of the same user removes
// every one whose amdrun is gone (removeStaleErrorDirs).
type errorDir struct {
	dir string   // its path, for the ranks
	fd  *os.File // the directory amdrun made
}

// errorDirPrefix starts the name of every errorDir: what the guards and
// the keeper check before they remove one.
const errorDirPrefix = "amdrun-errors-"

// errorOwnerFile is the file in which amdrun before 2026-12-03 named the
// amdrun that made an errorDir ("PID STARTTIME\n"); such a directory left
// behind is still recognised and removed.
const errorOwnerFile = ".amdrun-owner"

// randomPart matches the random part of an errorDir's name.
var randomPart = regexp.MustCompile(`^[0-9a-f]{16}$`)

// errorFileName matches the names errorDir.path gives out.
var errorFileName = regexp.MustCompile(`^attempt_[0-9]+\.rank_[0-9]+\.json$`)

func newErrorDir() (*errorDir, error) {
	base := errorDirBase()
	bfd, err := unix.Open(base, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("launch: error files: %s: %w", base, err)
	}
	defer unix.Close(bfd)
	removeStaleErrorDirs(bfd)
	start, err := startTime(os.Getpid())
	if err != nil {
		return nil, fmt.Errorf("launch: error files: %w", err)
	}
	for try := 0; ; try++ {
		var b [8]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, fmt.Errorf("launch: error files: %w", err)
		}
		name := errorDirName(os.Getpid(), start, hex.EncodeToString(b[:]))
		err := unix.Mkdirat(bfd, name, 0o700)
		if errors.Is(err, unix.EEXIST) && try < 100 {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("launch: error files: mkdir %s: %w", filepath.Join(base, name), err)
		}
		fd, err := openOwnDir(bfd, name)
		if err == nil {
			// The umask may have taken bits away; it never adds any.
			err = unix.Fchmod(fd, 0o700)
		}
		if err != nil {
			if fd >= 0 {
				unix.Close(fd)
			}
			_ = unix.Unlinkat(bfd, name, unix.AT_REMOVEDIR)
			return nil, fmt.Errorf("launch: error files: %s: %w", filepath.Join(base, name), err)
		}
		return &errorDir{dir: filepath.Join(base, name), fd: os.NewFile(uintptr(fd), filepath.Join(base, name))}, nil
	}
}

// openOwnDir opens the directory name in dirfd, never through a link,
// and only when it belongs to this user; -1 and an error otherwise.
func openOwnDir(dirfd int, name string) (int, error) {
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Uid != uint32(os.Geteuid()) {
		unix.Close(fd)
		return -1, fmt.Errorf("%s is not this user's", name)
	}
	return fd, nil
}

// errorDirName is the name of the errorDir the amdrun pid, started at
// start (clock ticks since boot, /proc/PID/stat field 22, so that a
// reused pid is not taken for it), makes with the random part r:
// amdrun-errors-PID-START-R.
func errorDirName(pid int, start uint64, r string) string {
	return fmt.Sprintf("%s%d-%d-%s", errorDirPrefix, pid, start, r)
}

// dirOwner is the pid and start time an errorDir's name gives; ok false
// for a name newErrorDir does not give.
func dirOwner(name string) (pid int, start uint64, ok bool) {
	f := strings.Split(strings.TrimPrefix(name, errorDirPrefix), "-")
	if len(f) != 3 || !strings.HasPrefix(name, errorDirPrefix) || !randomPart.MatchString(f[2]) {
		return 0, 0, false
	}
	pid, err := strconv.Atoi(f[0])
	if err != nil || pid <= 0 {
		return 0, 0, false
	}
	start, err = strconv.ParseUint(f[1], 10, 64)
	return pid, start, err == nil
}

// startTime is pid's start time in clock ticks since boot, from
// /proc/PID/stat.
func startTime(pid int) (uint64, error) {
	f, err := statFields(pid)
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(f[19], 10, 64) // starttime, field 22
}

// statFields are the fields of /proc/PID/stat after the command, the
// state (field 3) first; at least 20 of them, else an error.
func statFields(pid int) ([]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	f := statFieldsOf(b)
	if len(f) < 20 {
		return nil, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	return f, nil
}

// ownerGone says whether the amdrun pid, started at start, no longer runs.
func ownerGone(pid int, start uint64) bool {
	now, err := startTime(pid)
	return err != nil || now != start
}

// staleErrorDir says whether the errorDir name, open as fd, is one whose
// amdrun is gone: by its name, or (a directory an older amdrun left) by
// its owner file; what cannot be read is not proof of that.
func staleErrorDir(fd int, name string) bool {
	if pid, start, ok := dirOwner(name); ok {
		return ownerGone(pid, start)
	}
	var pid int
	var start uint64
	b := readAt(fd, errorOwnerFile, 64)
	if n, err := fmt.Sscanf(string(b), "%d %d\n", &pid, &start); n != 2 || err != nil || pid <= 0 {
		return false
	}
	return ownerGone(pid, start)
}

// removeStaleErrorDirs removes, from the directory dirfd, the errorDirs
// of this user whose amdrun is gone (killed before it could remove them):
// a directory of this user (not a link) whose name (or, left by an older
// amdrun, whose owner file) names no living process.
func removeStaleErrorDirs(dirfd int) {
	for _, name := range dirNames(dirfd) {
		if !strings.HasPrefix(name, errorDirPrefix) {
			continue
		}
		fd, err := openOwnDir(dirfd, name)
		if err != nil {
			continue
		}
		if staleErrorDir(fd, name) {
			emptyErrorDir(fd)
			_ = unix.Unlinkat(dirfd, name, unix.AT_REMOVEDIR)
		}
		unix.Close(fd)
	}
}

// readAt reads at most limit bytes of the regular file name in dirfd,
// this user's, never through a link; nil when there is none such or it
// is blank.
func readAt(dirfd int, name string, limit int64) []byte {
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Uid != uint32(os.Geteuid()) {
		return nil
	}
	b, _ := io.ReadAll(io.LimitReader(f, limit))
	if len(strings.TrimSpace(string(b))) == 0 {
		return nil
	}
	return b
}

// emptyErrorDir removes from the errorDir dirfd the files amdrun gave
// out (ownFile: error files, the stacks bootstrap and the ranks' stack
// and heartbeat files, the control socket) and the owner file an older
// amdrun wrote; nothing else.
func emptyErrorDir(dirfd int) {
	for _, name := range dirNames(dirfd) {
		if ownFile(name) {
			_ = unix.Unlinkat(dirfd, name, 0)
		}
	}
}

// removeErrorDirPath removes the errorDir at path (its name must be one
// newErrorDir gives), by a guard or the keeper once amdrun is gone: its
// error files, then the directory, which is left when something else is
// in it.
func removeErrorDirPath(path string) {
	base, name := filepath.Split(path)
	if path == "" || !strings.HasPrefix(name, errorDirPrefix) {
		return
	}
	bfd, err := unix.Open(base, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	defer unix.Close(bfd)
	fd, err := openOwnDir(bfd, name)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	emptyErrorDir(fd)
	_ = unix.Unlinkat(bfd, name, unix.AT_REMOVEDIR)
}

// path is local rank lr's error file in attempt k, as the rank is told.
func (e *errorDir) path(k, lr int) string {
	return filepath.Join(e.dir, errorFile(k, lr))
}

// errorFile is the name of local rank lr's error file in attempt k.
func errorFile(k, lr int) string { return fmt.Sprintf("attempt_%d.rank_%d.json", k, lr) }

// read returns what local rank lr recorded in attempt k; nil when it
// recorded nothing (no file, not a regular file of this user, or empty).
// At most maxErrorFile bytes are read.
func (e *errorDir) read(k, lr int) []byte {
	return readAt(int(e.fd.Fd()), errorFile(k, lr), maxErrorFile)
}

// drop removes local rank lr's error file of attempt k, once read.
func (e *errorDir) drop(k, lr int) {
	_ = unix.Unlinkat(int(e.fd.Fd()), errorFile(k, lr), 0)
}

// remove removes the directory and the files amdrun gave out in it.
func (e *errorDir) remove() {
	emptyErrorDir(int(e.fd.Fd()))
	e.fd.Close()
	base, name := filepath.Split(e.dir)
	if bfd, err := unix.Open(base, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err == nil {
		_ = unix.Unlinkat(bfd, name, unix.AT_REMOVEDIR)
		unix.Close(bfd)
	}
}

// dirNames lists the directory dirfd; nil when it cannot be read.
func dirNames(dirfd int) []string {
	d, err := unix.Openat(dirfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	f := os.NewFile(uintptr(d), ".")
	defer f.Close()
	names, _ := f.Readdirnames(-1)
	return names
}
