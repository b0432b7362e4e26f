// Package lease keeps amdrun jobs that share a node from using the same
// GPU: a lease is an exclusive flock(2) on a file named after the device's
// key in a lease directory, dropped by the kernel with the last descriptor
// of its open file; who holds one comes from the kernel, never the files.
// Dir.Claim puts together the node lock, the leases and the queue. The
// design and its guarantees: docs/shared-nodes.md.
package lease

import (
	"errors"
	"fmt"
	"net/url"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/amdrun/amdrun/internal/printable"
)

// DefaultDir is the lease directory every amdrun job on a node shares
// unless --lease-dir or AMDRUN_LEASE_DIR says otherwise.
const DefaultDir = "/run/lock/amdrun"

// nodeLock and queueDir name the node lock and the queue (never a FileName).
const (
	nodeLock = ".lock"
	queueDir = "queue"
)

// Sentinel errors; the errors this package returns wrap them.
var (
	// ErrBusy: a device is leased by a live process, or (from a Chooser)
	// no acceptable set is free now.
	ErrBusy = errors.New("device is leased by another process")
	// ErrUnsafe: a path is a symlink not followed, not the kind of file it
	// must be, or unreadable; it is never followed nor written.
	ErrUnsafe = errors.New("unsafe path")
	// ErrLocked: the node lock stayed held until the wait for it ended.
	ErrLocked = errors.New("node lock held")
	// ErrBadKey: a device key cannot be made into a lease file name.
	ErrBadKey = errors.New("bad device key")
	// ErrNotSupported: leases need Linux flock semantics.
	ErrNotSupported = errors.New("device leases are not supported on this system")
)

// Mode says who can change a lease directory.
type Mode int

const (
	// Shared: other users may write the directory (01777): the degraded mode.
	Shared Mode = iota
	// Owned: only the owner (Dir.Owner) can create or remove lease files;
	// owned by root, it is the root-prepared directory Init makes.
	Owned
)

func (m Mode) String() string {
	if m == Owned {
		return "owned"
	}
	return "shared"
}

// Options tell Open how to treat the directory.
type Options struct {
	// Warn receives one line per problem (the degraded mode, each
	// unusable lease file once per Dir); nil drops them.
	Warn func(format string, args ...any)
	// Create makes a missing directory 01777 (the degraded mode), parents
	// 0755. Without it a missing directory holds no lease and takes none.
	Create bool
}

// Holder is the process holding a lease, as the kernel knows it; a zero
// field is unknown, Command and User are printable.String.
type Holder struct {
	PID  int    `json:"pid"`
	UID  int    `json:"uid"` // -1: unknown
	User string `json:"user,omitempty"`
	// Start is when the holding process started (zero: unknown).
	Start   time.Time `json:"start,omitzero"`
	Command string    `json:"command,omitempty"`
	// Gone: the taker exited and no process this one may see holds it.
	Gone bool `json:"gone,omitempty"`
	// Locker is the pid that took the lock (/proc/locks) when the holder
	// is another process, or none was found though it lives (PID 0); 0
	// when PID took it.
	Locker int `json:"locker,omitempty"`
	// Outside: the holder does not run amdrun (a descriptor handed on).
	Outside bool `json:"outside,omitempty"`
	// Unverified: /proc does not let this process check that PID (the
	// taker) still holds the lock.
	Unverified bool `json:"unverified,omitempty"`
}

// String is a one-line description for messages:
// "pid 42 (alice: amdrun -n 2 train.py), started 15:04:05".
func (h Holder) String() string {
	var b strings.Builder
	if h.PID <= 0 {
		b.WriteString("an unknown process")
	} else {
		fmt.Fprintf(&b, "pid %d", h.PID)
	}
	who := h.User
	if who == "" && h.UID >= 0 && h.PID > 0 && !h.Gone {
		who = "uid " + strconv.Itoa(h.UID)
	}
	cmd := printable.String(strings.Join(strings.Fields(h.Command), " "), 60)
	switch {
	case h.Gone:
		b.WriteString(" (exited; the job's processes keep the lease)")
	case who != "" && cmd != "":
		fmt.Fprintf(&b, " (%s: %s)", who, cmd)
	case who+cmd != "": // one of them
		fmt.Fprintf(&b, " (%s)", who+cmd)
	}
	if !h.Start.IsZero() {
		b.WriteString(", started " + h.Start.Format("15:04:05"))
	}
	// Unverified is said by ps, not in every message naming a holder.
	if n := h.Note(); n != "" && !h.Gone && !h.Unverified {
		b.WriteString(" [" + n + "]")
	}
	return b.String()
}

// Note says how far the kernel vouches for the holder described, in a
// few words; "" for the process that took the lock and still holds it.
func (h Holder) Note() string {
	switch {
	case h.PID <= 0 && h.Locker > 0:
		return fmt.Sprintf("pid %d took it and holds it no more; the process it went to is not visible to this user", h.Locker)
	case h.Gone:
		return "exited; the job's processes keep the lease"
	case h.Outside:
		return fmt.Sprintf("outside the job: not an amdrun process; pid %d took the lease", h.Locker)
	case h.Locker > 0:
		return fmt.Sprintf("amdrun's, keeping the lease pid %d took", h.Locker)
	case h.Unverified:
		return "the pid that took it, as /proc/locks says; only root can check that it still holds it"
	}
	return ""
}

// Dir is an open lease directory, safe for concurrent use; two leases
// taken through one Dir still exclude each other (flocks are per open file).
type Dir struct {
	path     string
	fd       int // the directory, O_RDONLY; -1: it does not exist (Open without Create)
	dev, ino uint64
	mode     Mode
	owner    int
	euid     int
	degraded string
	warn     func(string, ...any)

	names  lockNames // its files as /proc/locks names them
	warned sync.Map  // warnOnce's keys
}

// Path returns the directory's path as given to Open, cleaned.
func (d *Dir) Path() string { return d.path }

// Mode says who can change the directory.
func (d *Dir) Mode() Mode { return d.mode }

// Owner is the uid that owns the directory (-1 when it does not exist).
func (d *Dir) Owner() int { return d.owner }

// Degraded says in one line which guarantee does not hold for this
// process's jobs here and why ("": none).
func (d *Dir) Degraded() string { return d.degraded }

// warnOnce warns once per key per Dir: a --wait loop asks Held many times.
func (d *Dir) warnOnce(key, format string, args ...any) {
	if _, seen := d.warned.LoadOrStore(key, true); !seen && d.warn != nil {
		d.warn(format, args...)
	}
}

// Lease is a set of devices held until Release (or their files' last close).
type Lease struct {
	keys []string
	mu   sync.Mutex
	fds  []int
}

// Ticket is a place in the queue (see Enqueue), until Done or the process ends.
type Ticket struct {
	dir         *Dir
	name        string
	need, total int
	pid         int
	since       time.Time // when it joined: the file's inode change time
	now         func() time.Time

	mu     sync.Mutex
	qfd    int // the queue directory
	fd     int // the ticket, locked; -1 after Done
	clock  clock
	heldBy *Waiting
	stats  scanStats
	// seen is when this waiter first saw each ticket ahead locked (nil
	// before its first look): age counts from the lock (issue 36.5).
	seen map[ticketKey]time.Time
	// known: the tickets the last look verified (issue 36.7).
	known map[ticketKey]Waiting
	// charged is the patience spent on each ticket ahead (see refund).
	charged map[ticketKey]time.Duration
	front   bool      // see leases
	names   lockNames // the queue's files as /proc/locks names them, when not its Dir's
}

// fileID is a file as /proc/locks names it: device and inode numbers.
type fileID struct{ major, minor, ino uint64 }

// lockNames names one directory's files as /proc/locks does (see id).
type lockNames struct {
	once sync.Once
	dev  fileID // ino unset
	ok   bool
}

// ticketKey names one ticket: its waiter and its file.
type ticketKey struct {
	pid int
	ino uint64
}

// State is what Held reports for a device that cannot be leased now.
type State struct {
	// Holder is the process holding the lease, when Fault is nil.
	Holder Holder `json:"holder"`
	// Fault says why the device's lease file cannot be used, wrapping
	// ErrUnsafe or fs.ErrNotExist.
	Fault error `json:"-"`
}

// InitReport says what Init did.
type InitReport struct {
	Path string
	// Created: Init made the directory (false: it adopted one).
	Created bool
	// Made lists the lock files created (".lock": the node lock); Kept
	// counts those already there.
	Made []string
	Kept int
	// Adopted says how Init took over a degraded-mode directory ("": no).
	Adopted string
}

// LockedError says the node lock stayed held until the wait for it ended.
type LockedError struct {
	Path   string
	Holder Holder
	Waited time.Duration
	Err    error
}

func (e *LockedError) Error() string {
	return fmt.Sprintf("lease: the node lock %s stayed held by %s (waited %s)", e.Path, e.Holder, e.Waited.Round(100*time.Millisecond))
}

// Unwrap returns ErrLocked and the context's error.
func (e *LockedError) Unwrap() []error { return []error{ErrLocked, e.Err} }

// WaitError says that the wait in the queue ended with its context; Behind
// is the ticket ahead at the last look (nil: devices were busy).
type WaitError struct {
	Behind *Waiting
	Err    error
}

func (e *WaitError) Error() string {
	if e.Behind != nil {
		return fmt.Sprintf("lease: waiting for devices, behind %s: %v", e.Behind, e.Err)
	}
	return fmt.Sprintf("lease: waiting for devices: %v", e.Err)
}

// Unwrap returns the context's error.
func (e *WaitError) Unwrap() error { return e.Err }

// Chooser picks the device keys to lease, given those Held says cannot be
// leased now; an error wrapping ErrBusy when no acceptable set is free
// (Claim waits or fails), any other stops Claim.
type Chooser func(held map[string]State) ([]string, error)

// FileName returns the lease file name of a device key: bytes other than
// ASCII letters, digits, '-', '_', ':' and '.', and a leading '.', are
// written %XX and ".lock" appended (KeyFromFileName inverts it). An empty
// key or a name over 255 bytes wraps ErrBadKey.
func FileName(key string) (string, error) {
	if key == "" {
		return "", fmt.Errorf("lease: %w: empty", ErrBadKey)
	}
	var b strings.Builder
	for i := 0; i < len(key); i++ {
		if c := key[i]; plainByte(c) && !(i == 0 && c == '.') {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	b.WriteString(".lock")
	if b.Len() > 255 {
		return "", fmt.Errorf("lease: %w: %.40q... is too long", ErrBadKey, key)
	}
	return b.String(), nil
}

// KeyFromFileName inverts FileName; false for a name it cannot give.
func KeyFromFileName(name string) (string, bool) {
	s, ok := strings.CutSuffix(name, ".lock")
	key, err := url.PathUnescape(s)
	if !ok || err != nil {
		return "", false
	}
	if back, err := FileName(key); err != nil || back != name {
		return "", false
	}
	return key, true
}

func plainByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '-' || c == '_' || c == ':' || c == '.'
}

// checkKeys validates keys and rejects duplicates (a second lock on a
// file would fail as if another process held it).
func checkKeys(keys []string) ([]string, error) {
	names := make([]string, len(keys))
	for i, k := range keys {
		n, err := FileName(k)
		if err != nil {
			return nil, err
		}
		if slices.Contains(keys[:i], k) {
			return nil, fmt.Errorf("lease: %w: %q given twice", ErrBadKey, k)
		}
		names[i] = n
	}
	return names, nil
}

// userName is the login name of uid, printable, or "" when unknown.
func userName(uid int) string {
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil && uid >= 0 {
		return printable.String(u.Username, 32)
	}
	return ""
}

// ownerName says who uid is: "alice (uid 1001)" or "uid 1001".
func ownerName(uid int) string {
	if n := userName(uid); n != "" {
		return fmt.Sprintf("%s (uid %d)", n, uid)
	}
	return "uid " + strconv.Itoa(uid)
}

// TmpfilesLines returns systemd-tmpfiles.d(5) lines making Init's directory.
func TmpfilesLines(path string, keys []string) ([]string, error) {
	names, err := checkKeys(keys)
	if err != nil {
		return nil, err
	}
	if !filepath.IsAbs(path) {
		return nil, fmt.Errorf("lease: tmpfiles.d needs an absolute path, not %q", path)
	}
	path = filepath.Clean(path)
	if strings.ContainsFunc(path, func(r rune) bool { return r <= ' ' || r == '"' || r == '\'' || r == '\\' || r == 0x7f }) {
		return nil, errors.New("lease: tmpfiles.d lines cannot name a path with spaces, quotes, backslashes or control characters")
	}
	// '%' starts a specifier in tmpfiles.d: FileName writes it for
	// escaped bytes, so it is doubled.
	esc := func(p string) string { return strings.ReplaceAll(p, "%", "%%") }
	lines := []string{
		fmt.Sprintf("d %s 0755 root root -", esc(path)),
		fmt.Sprintf("f %s 0644 root root -", esc(filepath.Join(path, nodeLock))),
		fmt.Sprintf("d %s 1777 root root -", esc(filepath.Join(path, queueDir))),
	}
	for _, n := range names {
		lines = append(lines, fmt.Sprintf("f %s 0644 root root -", esc(filepath.Join(path, n))))
	}
	return lines, nil
}
