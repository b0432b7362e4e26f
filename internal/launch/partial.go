package launch

import (
	"io"
	"time"
)

// partialAfter is how long a line without its newline (a prompt: pdb's
// "(Pdb) ") waits before the console shows it; its rest continues it
// without a second prefix (issue 23).
const partialAfter = 100 * time.Millisecond

// endOpen ends the line another stream left open on the console. c.mu is held.
func (c *console) endOpen(s *stream) {
	if c.open != nil && c.open != s {
		_, _ = c.openW.Write([]byte{'\n'})
		c.open, c.openW = nil, nil
	}
}

// partial writes more of s's partial line and end, prefixed unless it
// continues the open line; the line stays open unless finished.
func (c *console) partial(s *stream, w io.Writer, more, end []byte, finished bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.endOpen(s)
	var b []byte
	if c.open != s {
		b = append(b, s.prefix...)
	}
	_, _ = w.Write(append(append(b, more...), end...))
	c.open, c.openW = s, w
	if finished {
		c.open, c.openW = nil, nil
	}
}

// armPartial (re)starts the timer that shows pending. s.mu is held.
func (s *stream) armPartial(pending []byte) {
	s.pending = pending
	if s.timer == nil {
		s.timer = time.AfterFunc(partialAfter, s.showPending)
		return
	}
	s.timer.Reset(partialAfter)
}

// showPending shows what of the pending line the console does not yet.
func (s *stream) showPending() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.pending) > s.shownPart {
		s.con.partial(s, s.out, s.pending[s.shownPart:], nil, false)
		s.shownPart = len(s.pending)
	}
}

// stopPartial stops the timer and forgets the pending line. s.mu is held.
func (s *stream) stopPartial() {
	if s.timer != nil {
		s.timer.Stop()
	}
	s.pending = nil
}
