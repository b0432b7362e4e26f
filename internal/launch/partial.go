package launch

import (
	"io"
	"time"
)

// partialAfter is how long a line without its newline (a prompt: pdb's
// "(Pdb) ") waits before the console shows it; its rest continues it
// without a second prefix (issue 23).
const partialAfter = 100 * time.Millisecond

// endOpen ends the line another stream left open on the console, so that
// what is written next starts a line of its own. c.mu is held.
func (c *console) endOpen(s *stream) {
	if c.open != nil && c.open != s {
		_, _ = c.openW.Write([]byte{'\n'})
		c.open, c.openW = nil, nil
	}
}

// showPartial shows more of s's partial line, prefixed when the console is
// not on that line, else as its continuation; the line stays open.
func (c *console) showPartial(s *stream, w io.Writer, more []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.endOpen(s)
	var b []byte
	if c.open != s {
		b = append(b, s.prefix...)
	}
	b = append(b, more...)
	_, _ = w.Write(b)
	c.open, c.openW = s, w
}

// finishPartial writes rest, the end of a line s has shown part of, and
// end (a newline when the piece has none): as the line's continuation
// when the console is still on it, else prefixed on a line of its own.
func (c *console) finishPartial(s *stream, w io.Writer, rest []byte, end []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.endOpen(s)
	var b []byte
	if c.open != s {
		b = append(b, s.prefix...)
	}
	b = append(append(b, rest...), end...)
	_, _ = w.Write(b)
	c.open, c.openW = nil, nil
}

// armPartial (re)starts the timer that shows s's pending partial line.
// s.mu is held.
func (s *stream) armPartial(pending []byte) {
	s.pending = pending
	if s.timer == nil {
		s.timer = time.AfterFunc(partialAfter, s.showPending)
		return
	}
	s.timer.Reset(partialAfter)
}

// showPending is the timer's work: it shows what the console does not yet.
func (s *stream) showPending() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.pending) > s.shownPart {
		s.con.showPartial(s, s.out, s.pending[s.shownPart:])
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
