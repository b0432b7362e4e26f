package launch

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestStaleErrorDirs: a run removes the error file directories of this
// user whose amdrun is gone (killed before it could), by their name, and
// nothing else: not one whose amdrun lives, not one whose name names no
// amdrun, not
// a link named like one (nor what it points to), not a file amdrun did
// not give out. A directory a guard emptied but was killed before it
// removed (nothing in it) still goes: its name says whose it was.
func TestStaleErrorDirs(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	dead := exec.Command("/bin/true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	mk := func(name string, files ...string) string {
		dir := filepath.Join(tmp, name)
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			os.WriteFile(filepath.Join(dir, f), []byte(`{"message": "X: y"}`), 0o600)
		}
		return dir
	}
	gonePid := dead.Process.Pid
	stale := mk(errorDirName(gonePid, 1, "00000000000000ff"), "attempt_0.rank_0.json", "attempt_3.rank_12.json")
	emptied := mk(errorDirName(gonePid, 1, "0000000000000a0b"))
	extra := mk(errorDirName(gonePid, 1, "0000000000000c0d"), "attempt_0.rank_0.json", "notes.txt")
	unproven := mk(errorDirPrefix+"unproven", "attempt_0.rank_0.json")
	junk := mk(errorDirPrefix+"x-y-z", "attempt_0.rank_0.json")
	live, err := newErrorDir()
	if err != nil {
		t.Fatal(err)
	}
	defer live.remove()
	target := mk("elsewhere", "attempt_0.rank_0.json")
	os.Symlink(target, filepath.Join(tmp, errorDirName(gonePid, 1, "00000000000000aa")))

	next, err := newErrorDir()
	if err != nil {
		t.Fatal(err)
	}
	defer next.remove()
	exists := func(p string) bool { _, err := os.Lstat(p); return err == nil }
	for _, p := range []string{stale, emptied} {
		if exists(p) {
			t.Errorf("%s (its amdrun gone) was kept", p)
		}
	}
	if !exists(filepath.Join(extra, "notes.txt")) || exists(filepath.Join(extra, "attempt_0.rank_0.json")) {
		t.Errorf("%s: want only notes.txt kept", extra)
	}
	for _, p := range []string{filepath.Join(unproven, "attempt_0.rank_0.json"), filepath.Join(junk, "attempt_0.rank_0.json"), live.Name(),
		filepath.Join(target, "attempt_0.rank_0.json"), filepath.Join(tmp, errorDirName(gonePid, 1, "00000000000000aa"))} {
		if !exists(p) {
			t.Errorf("%s was removed", p)
		}
	}
	if fi, err := os.Stat(next.Name()); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("the new directory: %v, %v", fi, err)
	}
	pid, start, ok := dirOwner(filepath.Base(next.Name()))
	if !ok || pid != os.Getpid() || ownerGone(pid, start) {
		t.Errorf("the new directory %s does not name this living amdrun (%d, %d, %v)", next.Name(), pid, start, ok)
	}
	for _, name := range []string{errorDirPrefix + "0123456789abcdef", errorDirName(gonePid, 1, "mine"), errorDirName(gonePid, 1, "0123456789ABCDEF")} {
		if _, _, ok := dirOwner(name); ok {
			t.Errorf("%s, a name newErrorDir does not give, read as naming its amdrun", name)
		}
	}
}

// TestErrorDirReadsOnlyItsOwn: a rank's error file is read through the
// directory amdrun made, whatever its path now names: after the
// directory is swapped for a link to another, amdrun still reads its own.
func TestErrorDirReadsOnlyItsOwn(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	e, err := newErrorDir()
	if err != nil {
		t.Fatal(err)
	}
	defer e.remove()
	os.WriteFile(e.path(0, 0), []byte(`{"message": "Own: text"}`), 0o600)
	forged := t.TempDir()
	os.WriteFile(filepath.Join(forged, errorFile(0, 0)), []byte(`{"message": "Forged: text"}`), 0o600)
	moved := e.Name() + ".moved"
	if err := os.Rename(e.Name(), moved); err != nil {
		t.Fatal(err)
	}
	os.Symlink(forged, e.Name())
	if b := e.read(0, 0); string(b) != `{"message": "Own: text"}` {
		t.Errorf("read %q, want the file in amdrun's own directory", b)
	}
	os.Remove(e.Name())
	os.Rename(moved, e.Name())
}
