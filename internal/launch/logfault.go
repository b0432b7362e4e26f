package launch

import (
	"fmt"
	"os"
	"strings"
	"sync"
)

// logFaults tracks the run's log files whose writes failed: each is said
// when it happens and at the end with what was lost (issue 26).
type logFaults struct {
	say   func(string) // the console, not amdrun.log (which may be the file that fails)
	quiet bool         // -q: a fault is said only in the summary, not as a warning

	mu     sync.Mutex
	failed []*faultyLog
}

// wrap returns f as a log whose faults t reports; nil for nil.
func (t *logFaults) wrap(f *os.File) *faultyLog {
	if f == nil {
		return nil
	}
	return &faultyLog{f: f, t: t}
}

// summary says, at the end, which logs are incomplete and what each lost.
func (t *logFaults) summary() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.failed) == 0 {
		return
	}
	var parts []string
	for _, l := range t.failed {
		l.mu.Lock()
		parts = append(parts, fmt.Sprintf("%s (%d bytes lost: %v)", l.f.Name(), l.lost, l.err))
		l.mu.Unlock()
	}
	t.say(fmt.Sprintf("amdrun: the logs are incomplete: %s\n", strings.Join(parts, "; ")))
}

// faultyLog is a log file that, after its first failure, counts every
// byte as lost.
type faultyLog struct {
	f *os.File
	t *logFaults

	mu   sync.Mutex
	err  error
	lost int64
}

// Write reports success whatever happens: a log must not stop the output.
func (l *faultyLog) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		l.lost += int64(len(b))
		return len(b), nil
	}
	n, err := l.f.Write(b)
	if err != nil {
		l.err, l.lost = err, int64(len(b)-n)
		if pe, ok := err.(*os.PathError); ok {
			l.err = pe.Err
		}
		l.t.mu.Lock()
		l.t.failed = append(l.t.failed, l)
		l.t.mu.Unlock()
		if !l.t.quiet {
			l.t.say(fmt.Sprintf("amdrun: warning: writing %s failed: %v: the rest of it is lost (the job goes on)\n", l.f.Name(), l.err))
		}
	}
	return len(b), nil
}

func (l *faultyLog) Close() error { return l.f.Close() }
