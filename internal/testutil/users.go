package testutil

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// RequireRootEnv=1 (as in CI) turns RequireRoot's skip into a failure.
const RequireRootEnv = "AMDRUN_REQUIRE_ROOT"

// RequireRoot skips t unless it runs as root, or fails it when
// AMDRUN_REQUIRE_ROOT=1.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv(RequireRootEnv) == "1" {
		t.Fatalf("needs root (to create throwaway users), and %s=1 says it must run", RequireRootEnv)
	}
	t.Skipf("needs root to create throwaway users (CI runs it as root with %s=1)", RequireRootEnv)
}

// User is a throwaway local account made for one test.
type User struct {
	Name     string
	UID, GID int
}

// NewUser creates a local account with its own group and no home, for
// root only, removed when the test ends: stop the user's processes first.
func NewUser(t testing.TB) User {
	t.Helper()
	return NewUserPrefixed(t, "amdt")
}

// NewUserPrefixed is NewUser with the name starting with prefix.
func NewUserPrefixed(t testing.TB, prefix string) User {
	t.Helper()
	RequireRoot(t)
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	name := prefix + hex.EncodeToString(b[:])
	// Other test binaries may hold /etc/passwd's lock for a moment.
	if out, err := retry("useradd", "--no-create-home", "--user-group", "--shell", "/usr/sbin/nologin", name); err != nil {
		t.Fatalf("useradd %s: %v\n%s", name, err, out)
	}
	t.Cleanup(func() {
		if out, err := retry("userdel", name); err != nil {
			t.Errorf("userdel %s: %v\n%s", name, err, out)
		}
		// userdel removes the user's own group when it is empty; make sure.
		_ = exec.Command("groupdel", name).Run()
	})
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	if err := errors.Join(err1, err2); err != nil {
		t.Fatal(err)
	}
	return User{Name: name, UID: uid, GID: gid}
}

// retry runs name with args until it succeeds, 20 times at most.
func retry(name string, args ...string) ([]byte, error) {
	var out []byte
	var err error
	for try := 0; try < 20; try++ {
		if out, err = exec.Command(name, args...).CombinedOutput(); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	return out, err
}

// Command runs name with args as u, with u's group and no others
// (setpriv, no shell), in /.
func (u User) Command(name string, args ...string) *exec.Cmd {
	argv := append([]string{"--reuid", strconv.Itoa(u.UID), "--regid", strconv.Itoa(u.GID), "--clear-groups", "--", name}, args...)
	cmd := exec.Command("setpriv", argv...)
	cmd.Dir = "/"
	return cmd
}

// SharedDir returns a new directory of mode perm (chmod(2)'s) that every
// user can reach, unlike t.TempDir's, removed when the test ends.
func SharedDir(t testing.TB, perm uint32) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "amdrun-shared-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := syscall.Chmod(dir, uint32(perm)); err != nil {
		t.Fatal(err)
	}
	return dir
}

// PublicCopy copies the executable at path where other users can run it.
func PublicCopy(t testing.TB, path string) string {
	t.Helper()
	dst := filepath.Join(SharedDir(t, 0o755), filepath.Base(path))
	if err := os.WriteFile(dst, ReadFile(t, path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dst, 0o755); err != nil { // whatever the umask
		t.Fatal(err)
	}
	return dst
}

// Tree describes path and what is below it, one line per entry, without
// following links: equal Trees mean nothing there changed.
func Tree(t testing.TB, path string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && p == path {
				b.WriteString("(nothing)\n")
				return nil
			}
			return err
		}
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil {
			return err
		}
		rel, _ := filepath.Rel(path, p)
		fmt.Fprintf(&b, "%s %o uid %d ino %d size %d", rel, st.Mode, st.Uid, st.Ino, st.Size)
		if d.Type().IsRegular() {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			fmt.Fprintf(&b, " %q", data)
		}
		b.WriteByte('\n')
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}
