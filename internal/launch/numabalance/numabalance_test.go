package numabalance

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/amdrun/amdrun/internal/testutil"
)

// balancingRoot is testutil.FakeRoot with <root>/proc/sys/kernel/numa_balancing holding content; it
// returns the root and the file's path.
func balancingRoot(t *testing.T, content string) (root, path string) {
	t.Helper()
	root = testutil.FakeRoot(t, map[string]string{Path: content})
	return root, filepath.Join(root, Path)
}

func content(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestParseMode(t *testing.T) {
	tests := []struct {
		in      string
		want    Mode
		wantErr string
	}{
		{"off", Off, ""},
		{"on", On, ""},
		{"keep", Keep, ""},
		{" OFF ", Off, ""},
		{"Keep", Keep, ""},
		{"", "", `numa balancing: unknown mode "" (valid: off, on, keep)`},
		{"0", "", `numa balancing: unknown mode "0" (valid: off, on, keep)`},
		{"disable", "", `numa balancing: unknown mode "disable" (valid: off, on, keep)`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseMode(tt.in)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("ParseMode(%q) error = %v, want %s", tt.in, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseMode(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
			}
		})
	}
}

// TestApplyReadsEveryValue: every value the kernel writes is read (and
// put back byte for byte by restore).
func TestApplyReadsEveryValue(t *testing.T) {
	for _, before := range []string{"1\n", "0\n", "2\n", "3"} {
		root, path := balancingRoot(t, before)
		restore, err := Apply(root, Off)
		if err != nil {
			t.Errorf("Apply(off) on %q: %v", before, err)
			continue
		}
		if err := restore(); err != nil {
			t.Fatal(err)
		}
		if got := content(t, path); got != before {
			t.Errorf("restored %q, want %q", got, before)
		}
	}
}

func TestReadErrors(t *testing.T) {
	root := t.TempDir()
	_, err := Apply(root, Off)
	if !errors.Is(err, ErrNotSupported) {
		t.Fatalf("Apply(no file) = %v, want ErrNotSupported", err)
	}
	wantPrefix := "numa balancing not supported by this kernel (open " + filepath.Join(root, Path) + ": no such file or directory)"
	if err.Error() != wantPrefix {
		t.Errorf("message\n got %s\nwant %s", err, wantPrefix)
	}

	root, path := balancingRoot(t, "yes\n")
	_, err = Apply(root, Off)
	want := "numa balancing: " + path + `: unexpected value "yes"`
	if err == nil || err.Error() != want {
		t.Errorf("Apply(garbage) = %v, want %s", err, want)
	}
}

func TestApply(t *testing.T) {
	tests := []struct {
		name      string
		before    string
		mode      Mode
		during    string // file content while the job runs
		noRestore bool   // restore is a no-op: nothing was changed
	}{
		{"off from on", "1\n", Off, "0", false},
		{"on from off", "0\n", On, "1", false},
		{"on keeps memory tiering", "2\n", On, "3", false},
		{"off from tiering", "3\n", Off, "0", false},
		{"off when already off", "0\n", Off, "0\n", true},
		{"on when already on", "1\n", On, "1\n", true},
		{"on when tiering and normal", "3\n", On, "3\n", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root, path := balancingRoot(t, tt.before)
			restore, err := Apply(root, tt.mode)
			if err != nil {
				t.Fatalf("Apply: %v", err)
			}
			if got := content(t, path); got != tt.during {
				t.Errorf("during the job the file holds %q, want %q", got, tt.during)
			}
			if tt.noRestore {
				// Change the file: a restore that wrote anything would undo this.
				if err := os.WriteFile(path, []byte("9"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if err := restore(); err != nil {
				t.Fatalf("restore: %v", err)
			}
			want := tt.before
			if tt.noRestore {
				want = "9"
			}
			if got := content(t, path); got != want {
				t.Errorf("after restore the file holds %q, want %q", got, want)
			}
		})
	}
}

func TestApplyKeepTouchesNothing(t *testing.T) {
	root, path := balancingRoot(t, "1\n")
	old := time.Now().Add(-time.Hour).Truncate(time.Second)
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
	restore, err := Apply(root, Keep)
	if err != nil {
		t.Fatal(err)
	}
	if err := restore(); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if !fi.ModTime().Equal(old) {
		t.Errorf("keep changed mtime: %v, want %v", fi.ModTime(), old)
	}
	if got := content(t, path); got != "1\n" {
		t.Errorf("keep changed the file: %q", got)
	}
	// Keep must not even need the file.
	if _, err := Apply(t.TempDir(), Keep); err != nil {
		t.Errorf("Apply(keep) without the file: %v", err)
	}
}

func TestApplyMissingFile(t *testing.T) {
	root := t.TempDir()
	for _, m := range []Mode{Off, On} {
		restore, err := Apply(root, m)
		if !errors.Is(err, ErrNotSupported) || restore != nil {
			t.Errorf("Apply(%s) without the file = %v, %v; want ErrNotSupported", m, restore != nil, err)
		}
		if !strings.HasPrefix(err.Error(), "numa balancing not supported by this kernel") {
			t.Errorf("message: %s", err)
		}
	}
}

func TestApplyUnknownMode(t *testing.T) {
	root, path := balancingRoot(t, "1\n")
	_, err := Apply(root, Mode("auto"))
	if err == nil || err.Error() != `numa balancing: unknown mode "auto" (valid: off, on, keep)` {
		t.Errorf("Apply(auto) = %v", err)
	}
	if got := content(t, path); got != "1\n" {
		t.Errorf("file changed: %q", got)
	}
}

// TestApplyReadOnly uses a real read-only file; root ignores file modes,
// so it runs only as another user. TestApplyDenied covers root.
func TestApplyReadOnly(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root may write a 0444 file; see TestApplyDenied")
	}
	root, path := balancingRoot(t, "1\n")
	if err := os.Chmod(path, 0o444); err != nil {
		t.Fatal(err)
	}
	_, err := Apply(root, Off)
	want := "cannot set NUMA balancing: need root or CAP_SYS_ADMIN (open " + path + ": permission denied)"
	if err == nil || err.Error() != want || !errors.Is(err, ErrPermission) {
		t.Fatalf("Apply(off) on a read-only file = %v\nwant %s", err, want)
	}
	if got := content(t, path); got != "1\n" {
		t.Errorf("file changed: %q", got)
	}
}

func TestApplyDenied(t *testing.T) {
	tests := []struct {
		name  string
		errno syscall.Errno
		want  string
	}{
		{"permission", syscall.EACCES, "cannot set NUMA balancing: need root or CAP_SYS_ADMIN (open %s: permission denied)"},
		{"not permitted", syscall.EPERM, "cannot set NUMA balancing: need root or CAP_SYS_ADMIN (open %s: operation not permitted)"},
		{"container", syscall.EROFS, "cannot set NUMA balancing: %d is read-only here, as in most containers (open %s: read-only file system)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root, path := balancingRoot(t, "1\n")
			deny := func(name string, flag int, perm os.FileMode) (*os.File, error) {
				if flag&(os.O_WRONLY|os.O_RDWR) != 0 {
					return nil, &fs.PathError{Op: "open", Path: name, Err: tt.errno}
				}
				return os.OpenFile(name, flag, perm)
			}
			restore, err := apply(root, Off, deny)
			if err == nil || restore != nil {
				t.Fatalf("apply = %v, %v; want an error and no restore", restore != nil, err)
			}
			want := strings.Replace(tt.want, "%d", filepath.Dir(path), 1)
			want = strings.Replace(want, "%s", path, 1)
			if err.Error() != want {
				t.Errorf("message\n got %s\nwant %s", err, want)
			}
			if !errors.Is(err, ErrPermission) {
				t.Errorf("errors.Is(err, ErrPermission) = false")
			}
			if got := content(t, path); got != "1\n" {
				t.Errorf("file changed: %q", got)
			}
		})
	}
}

func TestRestoreTwice(t *testing.T) {
	root, path := balancingRoot(t, "1\n")
	restore, err := Apply(root, Off)
	if err != nil {
		t.Fatal(err)
	}
	if err := restore(); err != nil {
		t.Fatal(err)
	}
	if got := content(t, path); got != "1\n" {
		t.Fatalf("after first restore: %q", got)
	}
	// Someone changes it after the job; a second restore must not write.
	if err := os.WriteFile(path, []byte("0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := restore(); err != nil {
		t.Fatalf("second restore: %v", err)
	}
	if got := content(t, path); got != "0\n" {
		t.Errorf("second restore wrote: file holds %q, want %q", got, "0\n")
	}
}

func TestRestoreConcurrent(t *testing.T) {
	root, path := balancingRoot(t, "1\n")
	writes := 0
	var mu sync.Mutex
	counting := func(name string, flag int, perm os.FileMode) (*os.File, error) {
		mu.Lock()
		writes++
		mu.Unlock()
		return os.OpenFile(name, flag, perm)
	}
	restore, err := apply(root, Off, counting)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := restore(); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if writes != 2 { // one for Apply, one for restore
		t.Errorf("%d opens for writing, want 2", writes)
	}
	if got := content(t, path); got != "1\n" {
		t.Errorf("file holds %q, want %q", got, "1\n")
	}
}

func TestRestoreError(t *testing.T) {
	root, path := balancingRoot(t, "1\n")
	restore, err := Apply(root, Off)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	err = restore()
	want := `numa balancing: restore "1": numa balancing not supported by this kernel (open ` + path + ": no such file or directory)"
	if err == nil || err.Error() != want {
		t.Errorf("restore = %v\nwant %s", err, want)
	}
}
