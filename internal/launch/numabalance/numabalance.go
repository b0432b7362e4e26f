// Package numabalance sets the kernel's automatic NUMA balancing for a job
// and puts the previous value back afterwards: it migrates pages and tasks
// behind the job's back, fighting amdrun's binding. Paths are built from a
// root ("" or "/": the real system).
package numabalance

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Mode is the --numa-balancing choice.
type Mode string

const (
	// Off writes 0 for the job.
	Off Mode = "off"
	// On writes 1 for the job.
	On Mode = "on"
	// Keep leaves the setting alone and touches nothing.
	Keep Mode = "keep"
)

// Path is the sysctl file, relative to the root.
const Path = "proc/sys/kernel/numa_balancing"

// Sentinel errors; errors.Is finds them in the errors of Read and Apply.
var (
	// ErrNotSupported: the kernel has no numa_balancing sysctl.
	ErrNotSupported = errors.New("numa balancing not supported by this kernel")
	// ErrPermission: the sysctl cannot be opened for writing.
	ErrPermission = errors.New("cannot set NUMA balancing")
)

// ParseMode parses "off", "on" or "keep" (any case, spaces trimmed).
// Another value gives an error that lists the valid ones.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(strings.ToLower(strings.TrimSpace(s))); m {
	case Off, On, Keep:
		return m, nil
	}
	return "", fmt.Errorf("numa balancing: unknown mode %q (valid: off, on, keep)", s)
}

// target is the value Apply wants for m given cur: On sets bit 0 and keeps
// bit 1 (memory tiering), so 2 becomes 3.
func (m Mode) target(cur string) string {
	if m == Off {
		return "0"
	}
	n, err := strconv.ParseUint(cur, 10, 32)
	if err != nil { // readRaw checked the digits; only overflow is left
		return "1"
	}
	return strconv.FormatUint(n|1, 10)
}

// readRaw reads the sysctl as it is; a missing file wraps ErrNotSupported,
// content that is not a number is an error too.
func readRaw(path string) ([]byte, error) {
	raw, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w (%v)", ErrNotSupported, err)
	}
	if err != nil {
		return nil, fmt.Errorf("numa balancing: %w", err)
	}
	v := strings.TrimSpace(string(raw))
	if v == "" || strings.Trim(v, "0123456789") != "" {
		return nil, fmt.Errorf("numa balancing: %s: unexpected value %q", path, v)
	}
	return raw, nil
}

// openFunc opens a file; tests replace it to simulate EACCES as root.
type openFunc func(name string, flag int, perm os.FileMode) (*os.File, error)

// Apply sets NUMA balancing for the job and returns restore, which puts
// the previous value back byte for byte (once; later calls return nil).
// Keep touches nothing, nor does a value already the wanted one. Missing,
// it is ErrNotSupported; not writable, ErrPermission, the file unchanged.
func Apply(root string, mode Mode) (restore func() error, err error) {
	return apply(root, mode, os.OpenFile)
}

func apply(root string, mode Mode, open openFunc) (func() error, error) {
	noop := func() error { return nil }
	switch mode {
	case Keep:
		return noop, nil
	case Off, On:
	default:
		return nil, fmt.Errorf("numa balancing: unknown mode %q (valid: off, on, keep)", string(mode))
	}
	path := filepath.Join(cmp.Or(root, "/"), Path)
	prev, err := readRaw(path)
	if err != nil {
		return nil, err
	}
	cur := strings.TrimSpace(string(prev))
	want := mode.target(cur)
	if cur == want {
		return noop, nil
	}
	if err := write(open, path, want); err != nil {
		return nil, err
	}
	var once sync.Once
	return func() (err error) {
		once.Do(func() {
			if werr := write(open, path, string(prev)); werr != nil {
				err = fmt.Errorf("numa balancing: restore %q: %w", cur, werr)
			}
		})
		return err
	}, nil
}

func write(open openFunc, path, v string) error {
	f, err := open(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		switch {
		case errors.Is(err, fs.ErrPermission):
			return fmt.Errorf("%w: need root or CAP_SYS_ADMIN (%v)", ErrPermission, err)
		case errors.Is(err, syscall.EROFS):
			// Containers usually mount /proc/sys read-only.
			return fmt.Errorf("%w: %s is read-only here, as in most containers (%v)", ErrPermission, filepath.Dir(path), err)
		case errors.Is(err, fs.ErrNotExist):
			return fmt.Errorf("%w (%v)", ErrNotSupported, err)
		}
		return fmt.Errorf("%w: %v", ErrPermission, err)
	}
	_, werr := f.WriteString(v)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return fmt.Errorf("numa balancing: write %q: %w", strings.TrimSpace(v), werr)
	}
	return nil
}
