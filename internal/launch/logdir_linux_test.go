package launch

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/amdrun/amdrun/internal/plan"
)

// TestJobDirLayout: torchrun's layout, a fresh run directory per run (a
// second run with the same run id gets its own), one name whatever the
// run id holds, and nothing created twice.
func TestJobDirLayout(t *testing.T) {
	base := filepath.Join(t.TempDir(), "made", "by", "amdrun")
	var names []string
	for range 2 {
		d, err := openJobDir(base, "job/../x")
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		name := filepath.Base(d.Name())
		if !regexp.MustCompile(`^job_\.\._x_[a-z0-9_]{8}$`).MatchString(name) || filepath.Dir(d.Name()) != base {
			t.Errorf("run directory %s, want %s/job_.._x_XXXXXXXX", d.Name(), base)
		}
		if fi, err := os.Stat(d.Name()); err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("run directory mode: %v, %v", fi.Mode(), err)
		}
		names = append(names, name)
		a, err := d.attempt(0, []plan.Rank{{LocalRank: 0}, {LocalRank: 1}})
		if err != nil {
			t.Fatal(err)
		}
		f, err := a.create(1, "stdout.log")
		if err != nil {
			t.Fatal(err)
		}
		// The summary names a copied error file by this name.
		if want := filepath.Join(d.Name(), "attempt_0", "1", "stdout.log"); f.Name() != want {
			t.Errorf("file named %s, want %s", f.Name(), want)
		}
		f.WriteString("hello\n")
		f.Close()
		if b, _ := os.ReadFile(filepath.Join(d.Name(), "attempt_0", "1", "stdout.log")); string(b) != "hello\n" {
			t.Errorf("attempt_0/1/stdout.log = %q", b)
		}
		if _, err := a.create(1, "stdout.log"); !errors.Is(err, unix.EEXIST) {
			t.Errorf("created stdout.log twice: %v", err)
		}
		a.close()
		if _, err := d.attempt(0, []plan.Rank{{LocalRank: 0}}); !errors.Is(err, unix.EEXIST) {
			t.Errorf("made attempt_0 twice: %v", err)
		}
	}
	if names[0] == names[1] {
		t.Errorf("two runs share %s", names[0])
	}
}

// TestJobDirFollowsNoLink is issue 14's attack on a shared log directory:
// links planted where amdrun creates something are never followed, and
// what they point to is never written; BASE itself must not be a link.
func TestJobDirFollowsNoLink(t *testing.T) {
	precious := filepath.Join(t.TempDir(), "precious")
	if err := os.WriteFile(precious, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := t.TempDir()
	d, err := openJobDir(base, "r")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	// What a rank could plant in its own directories, and what another
	// user could plant in a directory amdrun is about to make.
	if err := os.Symlink(precious, filepath.Join(d.Name(), "amdrun.log")); err != nil {
		t.Fatal(err)
	}
	if _, err := d.create("amdrun.log"); err == nil || !strings.HasPrefix(err.Error(), "launch: log dir: create ") {
		t.Errorf("created amdrun.log over a link: %v", err)
	}
	if err := os.Symlink(t.TempDir(), filepath.Join(d.Name(), "attempt_3")); err != nil {
		t.Fatal(err)
	}
	if _, err := d.attempt(3, []plan.Rank{{LocalRank: 0}}); err == nil {
		t.Error("made attempt_3 through a link")
	}
	if b, _ := os.ReadFile(precious); string(b) != "keep" {
		t.Errorf("precious now holds %q", b)
	}

	link := filepath.Join(t.TempDir(), "logs")
	if err := os.Symlink(base, link); err != nil {
		t.Fatal(err)
	}
	if _, err := openJobDir(link, "r"); err == nil || err.Error() != "launch: log dir: "+link+" is a symbolic link (amdrun follows none in its log directory: give the directory it points to)" {
		t.Errorf("openJobDir(link) = %v", err)
	}
}

// TestErrorDir: a rank's error file is read only when it is a regular
// file, never through a link or from a FIFO, and at most maxErrorFile
// bytes of it.
func TestErrorDir(t *testing.T) {
	e, err := newErrorDir()
	if err != nil {
		t.Fatal(err)
	}
	defer e.remove()
	if fi, err := os.Stat(e.Name()); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("error directory mode %v, %v", fi.Mode(), err)
	}
	if e.path(2, 1) != filepath.Join(e.Name(), "attempt_2.rank_1.json") {
		t.Errorf("path %s", e.path(2, 1))
	}
	if b := e.read(0, 0); b != nil {
		t.Errorf("missing file read as %q", b)
	}
	os.WriteFile(e.path(0, 0), []byte(`{"message": "X: y"}`), 0o644)
	if b := e.read(0, 0); string(b) != `{"message": "X: y"}` {
		t.Errorf("read %q", b)
	}
	os.Symlink(e.path(0, 0), e.path(0, 1))
	if b := e.read(0, 1); b != nil {
		t.Errorf("read through a link: %q", b)
	}
	unix.Mkfifo(e.path(0, 2), 0o600)
	if b := e.read(0, 2); b != nil {
		t.Errorf("read a FIFO: %q", b)
	}
	os.WriteFile(e.path(0, 3), []byte(" \n"), 0o644)
	if b := e.read(0, 3); b != nil {
		t.Errorf("read a blank file as %q", b)
	}
	os.WriteFile(e.path(0, 4), []byte(strings.Repeat("x", maxErrorFile+100)), 0o644)
	if b := e.read(0, 4); len(b) != maxErrorFile {
		t.Errorf("read %d bytes, want %d", len(b), maxErrorFile)
	}
	e.remove()
	if _, err := os.Stat(e.Name()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("error directory left: %v", err)
	}
}
