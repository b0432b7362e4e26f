package launch

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/amdrun/amdrun/internal/lease"
	"github.com/amdrun/amdrun/internal/plan"
)

// jobDir is one run's log directory in torchrun's layout:
// BASE/<run id>_<8 random characters>/attempt_<k>/<local rank>/{stdout.log,
// stderr.log,error.json}, and amdrun.log. BASE may be world writable:
// everything in it is made relative to descriptors, O_EXCL, following no
// link (issue 14).
type jobDir struct{ *os.File }

// runDirName is torchrun's run directory name for runID (mkdtemp), its
// bytes other than [A-Za-z0-9._-] made '_'.
func runDirName(runID string) string {
	if runID == "" {
		runID = plan.NewRunID()
	}
	if len(runID) > 200 {
		runID = runID[:200]
	}
	b := []byte(runID)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_') {
			b[i] = '_'
		}
	}
	// Python's tempfile draws its 8 characters from these.
	const chars = "abcdefghijklmnopqrstuvwxyz0123456789_"
	var r [8]byte
	_, _ = rand.Read(r[:])
	for i := range r {
		r[i] = chars[int(r[i])%len(chars)]
	}
	return string(b) + "_" + string(r[:])
}

// openJobDir makes base (with its parents) when missing, as lease
// directories are made (issue 36.6), and a fresh run directory in it.
func openJobDir(base, runID string) (*jobDir, error) {
	parent, err := lease.MkdirAll("launch: log dir", "log directory", base, 0o755)
	if err != nil {
		if fi, lerr := os.Lstat(base); lerr == nil && fi.Mode()&os.ModeSymlink != 0 {
			return nil, fmt.Errorf("launch: log dir: %s is a symbolic link (amdrun follows none in its log directory: give the directory it points to)", base)
		}
		return nil, err
	}
	defer parent.Close()
	d, err := makeFreshDir(parent, func() string { return runDirName(runID) })
	if err != nil {
		return nil, fmt.Errorf("launch: log dir: %w", err)
	}
	return &jobDir{d}, nil
}

// makeFreshDir makes a directory (0700, as mkdtemp) in parent, named by
// name, drawing another name while the one drawn exists.
func makeFreshDir(parent *os.File, name func() string) (*os.File, error) {
	for tries := 0; ; tries++ {
		d, err := makeDir(parent, name(), 0o700)
		if !errors.Is(err, unix.EEXIST) || tries >= 100 {
			return d, err
		}
	}
}

// makeDir makes the directory name in parent and opens it; it fails when
// name exists or what it opens is not this user's.
func makeDir(parent *os.File, name string, perm uint32) (*os.File, error) {
	path := filepath.Join(parent.Name(), name)
	if err := unix.Mkdirat(int(parent.Fd()), name, perm); err != nil {
		return nil, &os.PathError{Op: "mkdir", Path: path, Err: err}
	}
	fd, err := openOwnDir(int(parent.Fd()), name)
	if err != nil {
		return nil, fmt.Errorf("%s was replaced after amdrun made it", path)
	}
	return os.NewFile(uintptr(fd), path), nil
}

// createIn creates name in dir, exclusively, following no link.
func createIn(dir *os.File, name string) (*os.File, error) {
	path := filepath.Join(dir.Name(), name)
	fd, err := unix.Openat(int(dir.Fd()), name,
		unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return nil, &os.PathError{Op: "create", Path: path, Err: err}
	}
	return os.NewFile(uintptr(fd), path), nil
}

func (d *jobDir) create(name string) (*os.File, error) { return createLog(d.File, name) }

func createLog(dir *os.File, name string) (*os.File, error) {
	f, err := createIn(dir, name)
	if err != nil {
		return nil, fmt.Errorf("launch: log dir: %w", err)
	}
	return f, nil
}

// attemptDir is attempt_<k>, with a directory per local rank.
type attemptDir struct {
	ranks map[int]*os.File
	logs  []*os.File // closed with it
}

func (d *jobDir) attempt(k int, ranks []plan.Rank) (*attemptDir, error) {
	ad, err := makeDir(d.File, "attempt_"+strconv.Itoa(k), 0o755)
	if err != nil {
		return nil, fmt.Errorf("launch: log dir: %w", err)
	}
	defer ad.Close()
	a := &attemptDir{ranks: map[int]*os.File{}}
	for _, r := range ranks {
		if a.ranks[r.LocalRank], err = makeDir(ad, strconv.Itoa(r.LocalRank), 0o755); err != nil {
			a.close()
			return nil, fmt.Errorf("launch: log dir: %w", err)
		}
	}
	return a, nil
}

func (a *attemptDir) create(lr int, name string) (*os.File, error) {
	return createLog(a.ranks[lr], name)
}

// close closes a (nil: nothing) and its logs.
func (a *attemptDir) close() {
	if a == nil {
		return
	}
	closeFiles(a.logs...)
	for _, f := range a.ranks {
		f.Close()
	}
}

// errorDirBase is where the error file directory goes: $TMPDIR when no
// other user can rename what is in it (issue 26: a forged error file was
// printed) and this user may make a directory there (issue 36.6), else /tmp.
func errorDirBase() string {
	if t := os.TempDir(); safeBase(t) && unix.Access(t, unix.W_OK|unix.X_OK) == nil {
		return t
	}
	return "/tmp"
}

// safeBase reports whether nobody but root and this user can rename or
// replace the entries of dir or of a directory above it (links resolved).
func safeBase(dir string) bool {
	real, err := filepath.EvalSymlinks(dir)
	if err != nil || !filepath.IsAbs(real) {
		return false
	}
	me := uint32(os.Geteuid())
	for p := real; ; p = filepath.Dir(p) {
		var st unix.Stat_t
		if unix.Lstat(p, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
			return false
		}
		if (st.Uid != 0 && st.Uid != me) || (st.Mode&0o022 != 0 && st.Mode&unix.S_ISVTX == 0) {
			return false
		}
		if p == "/" {
			return true
		}
	}
}

// openLogs makes the ranks' error file directory and, with logs (-r or -t
// without --log-dir: a temporary one, as torchrun's), the log directory.
func (s *supervisor) openLogs() error {
	var err error
	if s.errs, err = newErrorDir(); err != nil {
		return err
	}
	base := s.o.LogDir
	if base == "" && (!s.o.Redirects.IsZero() || !s.o.Tee.IsZero()) {
		if base, err = os.MkdirTemp("", "amdrun-logs-"); err != nil {
			return fmt.Errorf("launch: log dir: %w", err)
		}
	}
	if base == "" {
		return nil
	}
	if s.job, err = openJobDir(base, s.plan.RunID); err != nil {
		return err
	}
	f, err := s.job.create("amdrun.log")
	if err != nil {
		return err
	}
	s.notes = s.faults.wrap(f)
	if s.o.LogDir == "" {
		s.note(fmt.Sprintf("amdrun: the ranks' log files are in %s (-r/-t without --log-dir)\n", s.job.Name()))
	}
	return nil
}

// closeLogs closes what openLogs opened, once, as Run ends.
func (s *supervisor) closeLogs() {
	if s.notes != nil {
		s.notes.f.Close()
	}
	if s.job != nil {
		s.job.Close()
	}
	if s.errs != nil {
		s.errs.remove()
	}
}

// streams says which streams of local rank lr go to its log files and
// which to the console (RunOptions.Redirects, RanksFilter).
func (s *supervisor) streams(lr int) (logged, console Std) {
	console = StdAll
	if s.job != nil {
		red, tee := s.o.Redirects.For(lr), s.o.Tee.For(lr)
		if s.o.Redirects.IsZero() && s.o.Tee.IsZero() {
			tee = StdAll
		}
		logged = red | tee
		console = StdAll &^ (red &^ tee)
	}
	if !s.showsRank(lr) {
		console = StdNone
	}
	return logged, console
}

func (s *supervisor) showsRank(lr int) bool {
	return s.o.RanksFilter == nil || slices.Contains(s.o.RanksFilter, lr)
}

// keepFile copies r to name in the log directory, if there is one.
func (s *supervisor) keepFile(name string, r io.Reader) {
	if s.job == nil {
		return
	}
	if f, err := s.job.create(name); err == nil {
		_, _ = io.Copy(f, r)
		f.Close()
	}
}

// note writes one of amdrun's messages to Stderr and to amdrun.log.
func (s *supervisor) note(msg string) {
	s.con.write(s.o.Stderr, []byte(msg))
	if s.notes != nil {
		_, _ = io.WriteString(s.notes, msg)
	}
}
