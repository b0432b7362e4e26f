//go:build !linux

package lease

import (
	"context"
	"fmt"
	"os"
	"time"
)

// Open fails: leases need Linux flock semantics.
func Open(path string, o Options) (*Dir, error) {
	return nil, fmt.Errorf("lease: %w", ErrNotSupported)
}

// Init fails: leases need Linux flock semantics.
func Init(path string, keys []string) (*InitReport, error) {
	return nil, fmt.Errorf("lease: %w", ErrNotSupported)
}

// CanInit fails: leases need Linux flock semantics.
func CanInit() error {
	return fmt.Errorf("lease: %w", ErrNotSupported)
}

// Close does nothing: no directory can be opened on this system.
func (d *Dir) Close() error { return nil }

// Lock fails: leases need Linux flock semantics.
func (d *Dir) Lock(ctx context.Context) (unlock func(), err error) {
	return nil, fmt.Errorf("lease: %w", ErrNotSupported)
}

// Held fails: leases need Linux flock semantics.
func (d *Dir) Held(keys []string) (map[string]State, error) {
	return nil, fmt.Errorf("lease: %w", ErrNotSupported)
}

// Acquire fails: leases need Linux flock semantics.
func (d *Dir) Acquire(keys []string) (*Lease, error) {
	return nil, fmt.Errorf("lease: %w", ErrNotSupported)
}

// Release does nothing: no lease can be taken on this system.
func (l *Lease) Release() error { return nil }

// Files fails: no lease can be taken on this system.
func (l *Lease) Files() ([]*os.File, error) {
	return nil, fmt.Errorf("lease: %w", ErrNotSupported)
}

// QueueRoom is nil: there is no queue on this system.
func (d *Dir) QueueRoom(total int) error { return nil }

// Queue is empty: no ticket can be taken on this system.
func (d *Dir) Queue(total int) []Waiting { return nil }

// Claim fails: leases need Linux flock semantics.
func (d *Dir) Claim(ctx context.Context, all []string, need int, choose Chooser, poll time.Duration) (*Lease, error) {
	return nil, fmt.Errorf("lease: %w", ErrNotSupported)
}

// cpuFilesMade does nothing: no directory can be opened on this system.
func (d *Dir) cpuFilesMade(cpus []int) error { return nil }

// ListCPUs fails: leases need Linux flock semantics.
func (d *Dir) ListCPUs() (map[int]State, error) {
	return nil, fmt.Errorf("lease: %w", ErrNotSupported)
}
