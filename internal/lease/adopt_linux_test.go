package lease

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/amdrun/amdrun/internal/testutil"
	"golang.org/x/sys/unix"
)

// nobody is the uid that stands for another user's files here.
const nobody = 65534

// degradedDir makes what jobs leave in the degraded mode: a 01777
// directory with this process's lease file of gpu0 and, another user's,
// the node lock, gpu1's lease file, a sticky queue with a stale ticket
// and a notice marker.
func degradedDir(t *testing.T) string {
	t.Helper()
	testutil.RequireRoot(t)
	path := filepath.Join(t.TempDir(), "amdrun")
	d, _ := openIn(t, path)
	l, err := d.Acquire([]string{"gpu0"})
	if err != nil {
		t.Fatal(err)
	}
	l.Release()
	q := filepath.Join(path, queueDir)
	if err := mkdirMode(q, 0o1777); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{nodeLock: "", "gpu1.lock": "", noticePrefix + "x": "",
		filepath.Join(queueDir, ticketFile(nobody, 12345, 678, 9)): `{"need":1}` + "\n"}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(path, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range append([]string{queueDir}, sortedKeys(files)...) {
		if err := os.Lchown(filepath.Join(path, name), nobody, nobody); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

func sortedKeys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func statOf(t *testing.T, p string) unix.Stat_t {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// TestInitAdoptsDegraded: root's lease init takes over the directory
// jobs made in the degraded mode, says so, and replaces (never changes)
// what other users made (issue 31: it refused the directory, and the
// warning's advice did not work).
func TestInitAdoptsDegraded(t *testing.T) {
	path := degradedDir(t)
	mine := statOf(t, filepath.Join(path, "gpu0.lock"))
	theirs := statOf(t, filepath.Join(path, "gpu1.lock"))
	rep, err := Init(path, []string{"gpu0", "gpu1", "gpu2"})
	if err != nil {
		t.Fatal(err)
	}
	want := "adopted the directory jobs made in the degraded mode (owner root (uid 0), mode 1777): now root's, 0755; 2 lock files other users made replaced by root's, 1 stale queue tickets removed"
	if rep.Adopted != want {
		t.Errorf("Adopted %q, want %q", rep.Adopted, want)
	}
	if st := statOf(t, path); st.Uid != 0 || st.Mode&0o7777 != 0o755 {
		t.Errorf("directory: uid %d mode %04o, want root's 0755", st.Uid, st.Mode&0o7777)
	}
	for name, old := range map[string]unix.Stat_t{"gpu0.lock": mine, "gpu1.lock": theirs} {
		st := statOf(t, filepath.Join(path, name))
		if st.Uid != 0 || st.Mode&0o7777 != 0o644 || (st.Ino == old.Ino) != (old.Uid == 0) {
			t.Errorf("%s: uid %d mode %04o ino %d (was %d, uid %d): want root's own kept, another's replaced", name, st.Uid, st.Mode&0o7777, st.Ino, old.Ino, old.Uid)
		}
	}
	if st := statOf(t, filepath.Join(path, queueDir)); st.Uid != 0 || st.Mode&0o7777 != 0o1777 {
		t.Errorf("queue: uid %d mode %04o, want root's 1777", st.Uid, st.Mode&0o7777)
	}
	if left, _ := filepath.Glob(filepath.Join(path, queueDir, "*")); len(left) != 0 {
		t.Errorf("queue still holds %q", left)
	}
	if _, err := os.Lstat(filepath.Join(path, noticePrefix+"x")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("notice marker kept: %v", err)
	}
	d, w := openIn(t, path)
	if d.Mode() != Owned || d.Degraded() != "" || len(*w) != 0 {
		t.Errorf("after adoption: mode %v degraded %q warnings %q", d.Mode(), d.Degraded(), *w)
	}
}

// TestInitAdoptRefuses: what lease init cannot prove is amdrun's, or a
// job holds, is refused in one line, and nothing is changed.
func TestInitAdoptRefuses(t *testing.T) {
	for _, c := range []struct {
		name, want string
		busy       bool
		edit       func(t *testing.T, path string) func()
	}{
		{"a file amdrun does not make", "that lease init did not make: it holds files amdrun does not make (notes.txt)", false, func(t *testing.T, p string) func() {
			return write(t, filepath.Join(p, "notes.txt"), "x")
		}},
		{"a lock file with data", "gpu3.lock is not a file amdrun makes (a regular file of 4 bytes owned by root (uid 0))", false, func(t *testing.T, p string) func() {
			return write(t, filepath.Join(p, "gpu3.lock"), "data")
		}},
		{"a symlink named as a lock file", "gpu3.lock cannot be opened as amdrun's file", false, func(t *testing.T, p string) func() {
			if err := os.Symlink("/etc/passwd", filepath.Join(p, "gpu3.lock")); err != nil {
				t.Fatal(err)
			}
			return func() {}
		}},
		{"a file in the queue", "its queue holds files amdrun does not make (x)", false, func(t *testing.T, p string) func() {
			return write(t, filepath.Join(p, queueDir, "x"), "")
		}},
		{"a job holds a lease", "gpu0.lock is locked by pid " + strconv.Itoa(os.Getpid()), true, func(t *testing.T, p string) func() {
			return hold(t, filepath.Join(p, "gpu0.lock"))
		}},
		{"a job waits in the queue", ".lock is locked by pid " + strconv.Itoa(os.Getpid()), true, func(t *testing.T, p string) func() {
			return hold(t, filepath.Join(p, queueDir, ticketFile(nobody, 12345, 678, 9)))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := degradedDir(t)
			defer c.edit(t, path)()
			before := testutil.Tree(t, path)
			_, err := Init(path, []string{"gpu0", "gpu1"})
			if err == nil || errors.Is(err, ErrBusy) != c.busy || !strings.Contains(err.Error(), c.want) ||
				!strings.Contains(err.Error(), "lease init changes nothing there") || strings.Contains(err.Error(), "\n") {
				t.Errorf("Init: %v; want one line with %q", err, c.want)
			}
			if after := testutil.Tree(t, path); after != before {
				t.Errorf("Init changed the directory:\nbefore\n%s\nafter\n%s", before, after)
			}
		})
	}
}

func write(t *testing.T, p, data string) func() {
	t.Helper()
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	return func() {}
}

// hold write-locks the file p, as a job does, until the returned func.
func hold(t *testing.T, p string) func() {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	return func() { f.Close() }
}

// TestInitAdoptRaces: what a user adds or replaces just before the
// directory becomes root's is seen, and the directory gets its owner
// and mode back.
func TestInitAdoptRaces(t *testing.T) {
	for name, race := range map[string]func(path string){
		"a file added": func(p string) { os.WriteFile(filepath.Join(p, "notes.txt"), nil, 0o644) },
		"a lock file replaced": func(p string) {
			os.Remove(filepath.Join(p, "gpu1.lock"))
			os.Symlink("/etc/passwd", filepath.Join(p, "gpu1.lock"))
		},
	} {
		t.Run(name, func(t *testing.T) {
			path := degradedDir(t)
			if err := os.Chown(path, nobody, nobody); err != nil {
				t.Fatal(err)
			}
			before := statOf(t, path)
			afterSeize = race
			defer func() { afterSeize = nil }()
			if _, err := Init(path, []string{"gpu0", "gpu1"}); !errors.Is(err, ErrUnsafe) || !strings.Contains(err.Error(), "lease init changes nothing there") {
				t.Errorf("Init: %v, want a refusal", err)
			}
			if st := statOf(t, path); st.Uid != before.Uid || st.Mode != before.Mode {
				t.Errorf("directory: uid %d mode %o, want its own back (uid %d mode %o)", st.Uid, st.Mode, before.Uid, before.Mode)
			}
		})
	}
}

// FuzzIsTicketName: a name is a ticket's only when ticketFile gives it
// back exactly, or Ticket.make's random name before its rename (no sign,
// no leading zero, no trailing bytes).
func FuzzIsTicketName(f *testing.F) {
	for _, s := range []string{ticketFile(1000, 42, 123456, 77), "0-1-2-3.lock", "+1-2-3-4.lock", "01-2-3-4.lock", "1-2-3-4.lock.x", "1-2-3.lock", "1-2-3.new-00ab00cd00ef0012", "1-2-3.new-ab", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, n string) {
		var uid, pid int
		var start, ino uint64
		k, _ := fmt.Sscanf(n, "%d-%d-%d-%d.lock", &uid, &pid, &start, &ino)
		ticket := k == 4 && ticketFile(uid, pid, start, ino) == n
		k, _ = fmt.Sscanf(n, "%d-%d-%d.new-%x", &uid, &pid, &start, &ino)
		made := k == 4 && n == fmt.Sprintf("%d-%d-%d.new-%016x", uid, pid, start, ino)
		if isTicketName(n) != (ticket || made) || isTicketName(n) && strings.ContainsAny(n, "+ /") {
			t.Errorf("isTicketName(%q) = %v", n, isTicketName(n))
		}
	})
}
