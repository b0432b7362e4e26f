package reserve

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/amdrun/amdrun/internal/lease"
	"github.com/amdrun/amdrun/internal/selector"
)

// queuedSignals end a job that waits for devices (--wait): it leaves the
// queue and amdrun exits 128+n with one line (issue 36.6: Go's default
// left 4-17 ticket files per 200 jobs, and SIGQUIT a goroutine dump).
var queuedSignals = []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT}

// SignalError is Devices' error when one of queuedSignals came while the
// job waited: nothing is leased and the job left the queue.
type SignalError struct{ Signal syscall.Signal }

func (e *SignalError) Error() string {
	return fmt.Sprintf("%s while waiting for devices: left the queue", unix.SignalName(e.Signal))
}

// ExitStatus is the status amdrun exits with: 128+n, as a shell reports a
// process the signal ended.
func (e *SignalError) ExitStatus() int { return 128 + int(e.Signal) }

// devicesCatching is Devices for a job that may wait: queuedSignals end
// it with a *SignalError, a lease taken meanwhile let go.
func devicesCatching(ctx context.Context, r Options) (*selector.Choice, *lease.Lease, error) {
	sigs := make(chan os.Signal, 1)
	for _, sig := range queuedSignals {
		// One ignored stays so (nohup amdrun --wait: SIGHUP).
		if !signal.Ignored(sig) {
			signal.Notify(sigs, sig)
		}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	gone := make(chan struct{})
	go func() {
		defer close(gone)
		// A signal that came as the wait ended is still read before the close.
		if s, ok := <-sigs; ok {
			cancel(&SignalError{Signal: s.(syscall.Signal)})
		}
	}()
	c, l, err := devices(ctx, r)
	signal.Stop(sigs) // after it nothing is sent on sigs
	close(sigs)
	<-gone
	var se *SignalError
	if errors.As(context.Cause(ctx), &se) {
		if l != nil {
			l.Release()
		}
		return nil, nil, se
	}
	return c, l, err
}
