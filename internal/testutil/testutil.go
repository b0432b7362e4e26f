// Package testutil finds the repository's test data (fixtures, public
// captures, KFD trees unpacked on first use) and holds the tests' shared
// helpers. Only _test.go files import it.
package testutil

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// RepoRoot returns the directory holding go.mod, walking up from the
// test's working directory.
func RepoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the test directory")
		}
		dir = parent
	}
}

// Testdata returns the path of elem under the repository's testdata/.
func Testdata(t testing.TB, elem ...string) string {
	t.Helper()
	return filepath.Join(append([]string{RepoRoot(t), "testdata"}, elem...)...)
}

// Public returns the path of a published tool capture under
// testdata/public (provenance in SOURCES.md there).
func Public(t testing.TB, elem ...string) string {
	t.Helper()
	return Testdata(t, append([]string{"public"}, elem...)...)
}

// KFDTrees lists the real KFD sysfs trees kept as testdata/kfd/NAME.tar.gz.
var KFDTrees = []string{"topo-mi210-xgmi-pcie", "topo-mi300-cpx", "topology-parsing", "topology-parsing-mi308"}

// KFD returns the directory of the KFD tree name joined with elem,
// unpacked once per archive content (read-only by convention).
func KFD(t testing.TB, name string, elem ...string) string {
	t.Helper()
	dir, err := unpackOnce(Testdata(t, "kfd", name+".tar.gz"))
	if err != nil {
		t.Fatalf("kfd fixture %s: %v", name, err)
	}
	return filepath.Join(append([]string{dir, name}, elem...)...)
}

// unpackOnce unpacks archive into $TMPDIR/amdrun-testdata/<hash> unless
// it is there, by rename, so that concurrent test binaries do not race.
func unpackOnce(archive string) (string, error) {
	b, err := os.ReadFile(archive)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	base := filepath.Join(os.TempDir(), "amdrun-testdata")
	dst := filepath.Join(base, hex.EncodeToString(sum[:8]))
	if _, err := os.Stat(filepath.Join(dst, ".complete")); err == nil {
		return dst, nil
	}
	if err := os.MkdirAll(base, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(base, "unpack-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp) // nothing left there once renamed
	if err := untar(b, tmp); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(tmp, ".complete"), nil, 0o644); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, dst); err != nil {
		if _, serr := os.Stat(filepath.Join(dst, ".complete")); serr == nil {
			return dst, nil // another test binary won the race
		}
		// A stale, incomplete dst from an interrupted run: replace it.
		if rerr := os.RemoveAll(dst); rerr != nil {
			return "", err
		}
		return unpackOnce(archive)
	}
	return dst, nil
}

func untar(b []byte, dst string) error {
	zr, err := gzip.NewReader(strings.NewReader(string(b)))
	if err != nil {
		return err
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		name := filepath.Clean(h.Name)
		if filepath.IsAbs(name) || name == ".." || strings.HasPrefix(name, "../") {
			return fmt.Errorf("archive entry %q leaves the tree", h.Name)
		}
		p := filepath.Join(dst, name)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			data, err := io.ReadAll(tr)
			if err != nil {
				return err
			}
			if err := os.WriteFile(p, data, 0o644); err != nil {
				return err
			}
		default:
			return fmt.Errorf("archive entry %q: unsupported type %c", h.Name, h.Typeflag)
		}
	}
}

// ReadFile reads path or fails the test.
func ReadFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// EndToEnd marks a test that starts processes, uses namespaces, other
// users or real time: `go test -short` skips it.
func EndToEnd(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end test: skipped with -short (make test runs it)")
	}
}

// CheckOutcome is the fuzz targets' check of one run: an error is one
// line, and without one the result passes validate.
func CheckOutcome(t testing.TB, err error, validate func() error) {
	t.Helper()
	if err != nil {
		if strings.Contains(err.Error(), "\n") {
			t.Fatalf("error spans lines: %q", err)
		}
		return
	}
	if err := validate(); err != nil {
		t.Fatalf("result does not validate: %v", err)
	}
}

// WithEnv lists the live processes but this one whose environment holds
// kv ("KEY=VALUE"), a mark a test's job inherits in any PID namespace.
func WithEnv(kv string) []int {
	want := "\x00" + kv + "\x00"
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err == nil && strings.Contains("\x00"+string(b), want) {
			out = append(out, pid)
		}
	}
	return out
}

// Left lists the processes of a job not yet gone: WithEnv(kv), and those
// of before that are Holding.
func Left(kv string, before []Proc) []int {
	out := append(WithEnv(kv), Holding(before)...)
	slices.Sort(out)
	return slices.Compact(out)
}

// Proc names a process across pid reuse by its start time.
type Proc struct {
	PID   int
	Start string
}

// Snapshot names the processes pids (those that still exist).
func Snapshot(pids []int) []Proc {
	var out []Proc
	for _, pid := range pids {
		if st, ok := readStat(pid); ok {
			out = append(out, Proc{PID: pid, Start: st.start})
		}
	}
	return out
}

// pfExiting is the kernel's PF_EXITING task flag: the process is in
// exit(2) and runs no more code of its own.
const pfExiting = 0x4

// Holding lists those of procs not gone yet: running, or exiting with
// open files or memory still held, as a SIGKILLed process for a while.
func Holding(procs []Proc) []int {
	var out []int
	for _, p := range procs {
		st, ok := readStat(p.PID)
		if !ok || st.start != p.Start || st.state == "Z" || st.state == "X" {
			continue
		}
		if st.flags&pfExiting != 0 && st.rss == 0 {
			if fds, err := os.ReadDir("/proc/" + strconv.Itoa(p.PID) + "/fd"); err != nil || len(fds) == 0 {
				continue
			}
		}
		out = append(out, p.PID)
	}
	return out
}

type procStat struct {
	state, start string
	flags, rss   uint64
}

// readStat reads a process's state, flags, resident pages and start time
// from /proc/PID/stat, whose comm field may hold spaces and parentheses.
func readStat(pid int) (procStat, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, false
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return procStat{}, false
	}
	// Fields counted from 3 (state): flags is field 9, starttime 22, rss 24.
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 22 {
		return procStat{}, false
	}
	flags, _ := strconv.ParseUint(f[6], 10, 64)
	rss, _ := strconv.ParseUint(f[21], 10, 64)
	return procStat{state: f[0], start: f[19], flags: flags, rss: rss}, true
}
