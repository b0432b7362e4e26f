package launch

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// errorDir is the private directory (0700, fresh, in errorDirBase) of the
// ranks' error files and amdrun's other files for them; amdrun reads and
// removes in it only relative to its descriptor, only this user's regular
// files and the names it gives out. Its name names its amdrun, so that
// what is left of it is removed by a guard, the keeper or the next run.
type errorDir struct{ *os.File }

const errorDirPrefix = "amdrun-errors-"

var randomPart = regexp.MustCompile(`^[0-9a-f]{16}$`)

var errorFileName = regexp.MustCompile(`^attempt_[0-9]+\.rank_[0-9]+\.json$`)

func newErrorDir() (*errorDir, error) {
	base := errorDirBase()
	bfd, err := unix.Open(base, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("launch: error files: %s: %w", base, err)
	}
	parent := os.NewFile(uintptr(bfd), base)
	defer parent.Close()
	for _, name := range dirNames(bfd) {
		if pid, start, ok := dirOwner(name); ok && ownerGone(pid, start) {
			removeErrorDirIn(bfd, name)
		}
	}
	start, err := startTime(os.Getpid())
	if err != nil {
		return nil, fmt.Errorf("launch: error files: %w", err)
	}
	d, err := makeFreshDir(parent, func() string {
		var b [8]byte
		_, _ = rand.Read(b[:])
		return errorDirName(os.Getpid(), start, hex.EncodeToString(b[:]))
	})
	if err == nil {
		if err = d.Chmod(0o700); err != nil { // the umask may have taken bits away
			d.Close()
			_ = unix.Unlinkat(bfd, filepath.Base(d.Name()), unix.AT_REMOVEDIR)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("launch: error files: %w", err)
	}
	return &errorDir{d}, nil
}

// openOwnDir opens this user's directory name in dirfd, never through a link.
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

// errorDirName is amdrun-errors-PID-START-R: amdrun's pid and start (a
// reused pid is not it), and the random part r.
func errorDirName(pid int, start uint64, r string) string {
	return fmt.Sprintf("%s%d-%d-%s", errorDirPrefix, pid, start, r)
}

// dirOwner is the pid and start time an errorDir's name gives.
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

// startTime is pid's start in clock ticks since boot.
func startTime(pid int) (uint64, error) {
	f, err := statFields(pid)
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(f[19], 10, 64) // starttime, field 22
}

// statFields are /proc/PID/stat's fields after the command (at least 20).
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

// removeErrorDirIn removes this user's errorDir name in dirfd: the files
// amdrun gave out, then it unless something else is in it.
func removeErrorDirIn(dirfd int, name string) {
	if fd, err := openOwnDir(dirfd, name); err == nil {
		emptyErrorDir(fd)
		_ = unix.Unlinkat(dirfd, name, unix.AT_REMOVEDIR)
		unix.Close(fd)
	}
}

// emptyErrorDir removes the files amdrun gave out (ownFile), nothing else.
func emptyErrorDir(dirfd int) {
	for _, name := range dirNames(dirfd) {
		if ownFile(name) {
			_ = unix.Unlinkat(dirfd, name, 0)
		}
	}
}

// removeErrorDirPath removes the errorDir at path (removeErrorDirIn) once
// amdrun is gone.
func removeErrorDirPath(path string) {
	base, name := filepath.Split(path)
	if path == "" || !strings.HasPrefix(name, errorDirPrefix) {
		return
	}
	if bfd, err := unix.Open(base, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err == nil {
		removeErrorDirIn(bfd, name)
		unix.Close(bfd)
	}
}

func (e *errorDir) path(k, lr int) string {
	return filepath.Join(e.Name(), errorFile(k, lr))
}

func errorFile(k, lr int) string { return fmt.Sprintf("attempt_%d.rank_%d.json", k, lr) }

// read returns what local rank lr recorded in attempt k: at most
// maxErrorFile bytes of this user's regular file, never through a link;
// nil when none or blank.
func (e *errorDir) read(k, lr int) []byte {
	fd, err := unix.Openat(int(e.Fd()), errorFile(k, lr), unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	f := os.NewFile(uintptr(fd), errorFile(k, lr))
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Uid != uint32(os.Geteuid()) {
		return nil
	}
	b, _ := io.ReadAll(io.LimitReader(f, maxErrorFile))
	if len(strings.TrimSpace(string(b))) == 0 {
		return nil
	}
	return b
}

func (e *errorDir) drop(k, lr int) {
	_ = unix.Unlinkat(int(e.Fd()), errorFile(k, lr), 0)
}

func (e *errorDir) remove() {
	emptyErrorDir(int(e.Fd()))
	e.Close()
	removeErrorDirPath(e.Name())
}

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
