//go:build !linux

package lease

import (
	"context"
	"fmt"
	"os"
	"time"
)

// Off Linux there are no leases: what would take or look at one fails
// with errNoLeases, what gives one back or lists a queue does nothing.
var errNoLeases = fmt.Errorf("lease: %w", ErrNotSupported)

func Open(path string, o Options) (*Dir, error)             { return nil, errNoLeases }
func Init(path string, keys []string) (*InitReport, error)  { return nil, errNoLeases }
func CanInit() error                                        { return errNoLeases }
func (d *Dir) Close() error                                 { return nil }
func (d *Dir) Lock(ctx context.Context) (func(), error)     { return nil, errNoLeases }
func (d *Dir) Held(keys []string) (map[string]State, error) { return nil, errNoLeases }
func (d *Dir) Acquire(keys []string) (*Lease, error)        { return nil, errNoLeases }
func (l *Lease) Release() error                             { return nil }
func (l *Lease) Files() ([]*os.File, error)                 { return nil, errNoLeases }
func (d *Dir) QueueRoom(total int) error                    { return nil }
func (d *Dir) Queue(total int) []Waiting                    { return nil }
func (d *Dir) cpuFilesMade(cpus []int) error                { return nil }
func (d *Dir) ListCPUs() (map[int]State, error)             { return nil, errNoLeases }
func (d *Dir) Claim(ctx context.Context, all []string, need int, choose Chooser, poll time.Duration) (*Lease, error) {
	return nil, errNoLeases
}
