// Package lease keeps amdrun jobs that share a node from using the same
// GPU. A lease on a device is an exclusive flock(2) on a file named after
// the device key in a shared directory (DefaultDir). The kernel drops the
// lock the instant its holder exits, however it exits, so there are no
// stale leases and no clean-up step: a lease file whose lock is free is not
// held, whatever it contains. The JSON written into a lease file is for
// people (and for Held); it never decides who holds a device.
//
// Choosing devices is serialised by a node-wide lock (Dir.Lock) and jobs
// that wait for devices are served first come, first served through a
// ticket queue (Dir.Enqueue). Dir.Claim puts the three together.
package lease

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DefaultDir is the lease directory every amdrun job on a node shares
// unless --lease-dir or AMDRUN_LEASE_DIR says otherwise.
const DefaultDir = "/run/lock/amdrun"

// Sentinel errors; the errors this package returns wrap them.
var (
	// ErrBusy: a device is leased by a live process, or (from a Chooser)
	// no acceptable set of devices is free right now.
	ErrBusy = errors.New("device is leased by another process")
	// ErrUnsafe: a path in the lease directory is a symlink, or is not the
	// kind of file it must be; it is never followed nor written.
	ErrUnsafe = errors.New("unsafe path")
	// ErrBadKey: a device key cannot be made into a lease file name.
	ErrBadKey = errors.New("bad device key")
	// ErrNotSupported: leases need Linux flock semantics.
	ErrNotSupported = errors.New("device leases are not supported on this system")
)

// maxInfo bounds how much of a lease file Held reads.
const maxInfo = 64 << 10

// Holder describes the process holding a lease. Acquire writes it as JSON
// into each lease file; Held reads it back. A zero field is unknown.
type Holder struct {
	PID     int       `json:"pid"`
	User    string    `json:"user,omitempty"`
	UID     int       `json:"uid"`
	Start   time.Time `json:"start"`             // when the lease was taken
	Command string    `json:"command,omitempty"` // the holder's command line
	Devices []string  `json:"devices,omitempty"` // every key the holder leased together
	Host    string    `json:"host,omitempty"`
}

// CurrentHolder describes this process holding devices, starting now.
func CurrentHolder(devices []string) Holder {
	h := Holder{
		PID:     os.Getpid(),
		UID:     os.Geteuid(),
		Start:   time.Now(),
		Command: strings.Join(os.Args, " "),
		Devices: append([]string(nil), devices...),
	}
	h.User = userName(h.UID)
	h.Host, _ = os.Hostname()
	return h
}

// String is a one-line description for messages: "pid 42 (alice: amdrun -n 2 train.py)".
func (h Holder) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "pid %d", h.PID)
	who := h.User
	if who == "" && (h.UID != 0 || h.PID != 0) {
		who = "uid " + strconv.Itoa(h.UID)
	}
	cmd := h.Command
	if len(cmd) > 80 {
		cmd = cmd[:77] + "..."
	}
	switch {
	case who != "" && cmd != "":
		fmt.Fprintf(&b, " (%s: %s)", who, cmd)
	case who != "":
		fmt.Fprintf(&b, " (%s)", who)
	case cmd != "":
		fmt.Fprintf(&b, " (%s)", cmd)
	}
	if h.Host != "" {
		if hn, _ := os.Hostname(); hn != h.Host {
			fmt.Fprintf(&b, " on %s", h.Host)
		}
	}
	return b.String()
}

func userName(uid int) string {
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		return u.Username
	}
	return ""
}

// Dir is an open lease directory. Its methods are safe for concurrent use;
// the locks they take belong to the open file, so two leases taken through
// one Dir in one process still exclude each other.
type Dir struct {
	path string
	warn func(string, ...any)
	euid int
}

// Path returns the directory's path.
func (d *Dir) Path() string { return d.path }

func (d *Dir) warnf(format string, args ...any) {
	if d.warn != nil {
		d.warn(format, args...)
	}
}

// Lease is a set of devices held by this process until Release (or until
// the process exits). Keep it reachable for the life of the job.
type Lease struct {
	dir  *Dir
	keys []string
	mu   sync.Mutex
	fds  []int
	own  []bool // whether we wrote the holder info into fds[i]
}

// Keys returns the leased device keys, in the order given to Acquire.
func (l *Lease) Keys() []string { return append([]string(nil), l.keys...) }

// Ticket is a place in the directory's first-come-first-served queue of
// jobs waiting for devices. It stays in the queue until Done or until the
// process exits.
type Ticket struct {
	dir  *Dir
	name string
	mu   sync.Mutex
	fd   int
}

// Name returns the ticket's file name in DIR/queue; names sort in
// arrival order.
func (t *Ticket) Name() string { return t.name }

// FileName returns the lease file name for a device key: bytes other than
// ASCII letters, digits, '-', '_', ':' and '.' are written %XX, as is a
// leading '.', and ".lock" is appended. So the name never holds a slash,
// never starts with a dot, and different keys give different names
// (KeyFromFileName inverts it). An empty key or one whose name would be
// longer than 255 bytes gives an error wrapping ErrBadKey.
func FileName(key string) (string, error) {
	if key == "" {
		return "", fmt.Errorf("lease: %w: empty", ErrBadKey)
	}
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(key); i++ {
		c := key[i]
		if plainByte(c) && !(i == 0 && c == '.') {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	b.WriteString(".lock")
	if b.Len() > 255 {
		return "", fmt.Errorf("lease: %w: %.40q... is too long", ErrBadKey, key)
	}
	return b.String(), nil
}

// KeyFromFileName inverts FileName. It reports false for a name FileName
// cannot produce.
func KeyFromFileName(name string) (string, bool) {
	s, ok := strings.CutSuffix(name, ".lock")
	if !ok || s == "" || s[0] == '.' {
		return "", false
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '%' {
			if !plainByte(c) {
				return "", false
			}
			b.WriteByte(c)
			continue
		}
		if i+2 >= len(s) {
			return "", false
		}
		hi, lo := unhex(s[i+1]), unhex(s[i+2])
		if hi < 0 || lo < 0 {
			return "", false
		}
		v := byte(hi<<4 | lo)
		if plainByte(v) && !(b.Len() == 0 && v == '.') {
			return "", false // FileName would not have escaped it
		}
		b.WriteByte(v)
		i += 2
	}
	return b.String(), true
}

func plainByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '-' || c == '_' || c == ':' || c == '.'
}

func unhex(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// checkKeys validates keys and rejects duplicates: a second lock on the
// same file would fail as if another process held it.
func checkKeys(keys []string) ([]string, error) {
	names := make([]string, len(keys))
	seen := make(map[string]bool, len(keys))
	for i, k := range keys {
		n, err := FileName(k)
		if err != nil {
			return nil, err
		}
		if seen[k] {
			return nil, fmt.Errorf("lease: %w: %q given twice", ErrBadKey, k)
		}
		seen[k] = true
		names[i] = n
	}
	return names, nil
}

// Chooser picks the device keys to lease, given the ones held now (as
// Held returns them). When no acceptable set is free it returns an error
// wrapping ErrBusy, and Claim waits or fails; any other error stops Claim.
type Chooser func(held map[string]Holder) ([]string, error)
