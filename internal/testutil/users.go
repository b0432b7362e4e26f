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

// RequireRootEnv, set to 1 (as CI does), turns RequireRoot's skip into a
// failure: the tests that play other local users must run there.
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

// NewUser creates a local account with its own group and no home
// (useradd) and removes both when the test ends (userdel). It needs
// root (RequireRoot). Stop every process started as the user before the
// test ends: userdel refuses a user who still runs one.
func NewUser(t testing.TB) User {
	t.Helper()
	return NewUserPrefixed(t, "amdt")
}

// NewUserPrefixed is NewUser with the account's name starting with
// prefix (a helper's tests name their throwaway users apart).
func NewUserPrefixed(t testing.TB, prefix string) User {
	t.Helper()
	RequireRoot(t)
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	name := prefix + hex.EncodeToString(b[:])
	// useradd locks /etc/passwd; test binaries of other packages may hold
	// it for a moment.
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

// retry runs name with args until it succeeds, 20 times at most, 100 ms
// apart, and returns its last output and error.
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

// Command returns a command that runs name with args as u, with u's
// group and no supplementary groups (setpriv from util-linux: argv is
// passed as is, never through a shell). Its working directory is /,
// which every user can reach; its environment is the test's.
func (u User) Command(name string, args ...string) *exec.Cmd {
	argv := append([]string{"--reuid", strconv.Itoa(u.UID), "--regid", strconv.Itoa(u.GID), "--clear-groups", "--", name}, args...)
	cmd := exec.Command("setpriv", argv...)
	cmd.Dir = "/"
	return cmd
}

// SharedDir returns a new directory under the system's temporary
// directory with mode perm (chmod(2)'s: 0o1777 is sticky), reachable by
// every user unlike t.TempDir's; it is removed when the test ends.
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

// PublicCopy copies the executable at path into a new SharedDir, mode
// 0755, so that other users can run it (a test binary lives in a private
// build directory), and returns the copy's path.
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

// Tree describes what is at path and below it, one line per entry
// (relative name, type and mode, owner, inode, size, and a regular
// file's bytes), without following links: two equal Trees mean nothing
// there was moved, renamed, changed or added.
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
