package launch

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

const maxLine = 64 << 10

// tailLines is how many stderr lines a failure summary shows per rank.
const tailLines = 10

// console writes whole lines to the user's streams, so that lines of
// different ranks never interleave mid-line.
type console struct {
	mu   sync.Mutex
	open *stream // whose partial line the console shows; nil: none
}

func (c *console) write(w io.Writer, b []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.endOpen(nil)
	_, _ = w.Write(b) // a console that fails must not stop the workers
}

// tail keeps a stream's last lines in a ring of reused slots.
type tail struct {
	mu   sync.Mutex
	ring [tailLines][]byte
	next int // the slot the next line takes
	n    int // lines kept, up to tailLines
}

// add keeps one piece of a stream, but not a progress bar's (a lone
// carriage return ends it).
func (t *tail) add(piece []byte) {
	if piece[len(piece)-1] == '\r' {
		return
	}
	piece = bytes.TrimRight(piece, "\r\n")
	t.mu.Lock()
	defer t.mu.Unlock()
	t.ring[t.next] = append(t.ring[t.next][:0], piece...)
	t.next = (t.next + 1) % tailLines
	t.n = min(t.n+1, tailLines)
}

func (t *tail) get() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]string, 0, t.n)
	for i := t.n; i > 0; i-- {
		out = append(out, string(t.ring[(t.next-i+tailLines)%tailLines]))
	}
	return out
}

// stream copies one worker pipe to the console, a log file and a tail.
type stream struct {
	con    *console
	out    io.Writer // console destination; nil: not shown
	prefix string    // "" for none
	// raw passes the bytes as they come: the only rank shown, unprefixed.
	raw  bool
	log  io.Writer     // nil: no log file
	tail *tail         // nil: not kept
	seen *atomic.Int64 // the time of each read, for the stall watch; nil: none
	buf  []byte        // what goes to the console, reused

	// mu guards the partial line (pending, of which the console shows
	// shownPart) shared with the timer that shows it.
	mu        sync.Mutex
	pending   []byte
	shownPart int
	timer     *time.Timer
}

// pump copies r until EOF or error and closes it. The log file gets every
// byte as read; the console and the tail get pieces (pieceEnd). Text after
// a carriage return (a tqdm bar) is redrawn whole, in place, as it grows.
func (s *stream) pump(r *os.File) {
	defer r.Close()
	buf := make([]byte, maxLine)
	n := 0           // buf[:n] is the line not complete yet
	afterCR := false // a lone carriage return ended the last piece
	drawn := -1      // buf[:drawn] is on the console already (redraw); -1: nothing
	lastByte := byte('\n')
	for {
		m, err := r.Read(buf[n:])
		s.mu.Lock()
		if m > 0 {
			if s.seen != nil {
				s.seen.Store(time.Now().UnixNano())
			}
			chunk := buf[n : n+m]
			if s.log != nil {
				_, _ = s.log.Write(chunk)
			}
			if s.raw && s.out != nil {
				s.con.write(s.out, chunk)
				lastByte = chunk[m-1]
			}
			n += m
			done := 0
			for done < n {
				end := pieceEnd(buf[done:n])
				if end < 0 {
					break
				}
				// A bar drawn already, now ended by its \r, is not drawn again.
				shown := done == 0 && drawn == end-1 && buf[end-1] == '\r'
				s.emit(buf[done:done+end], afterCR, shown)
				afterCR = buf[done+end-1] == '\r'
				done += end
			}
			if done > 0 {
				drawn = -1
				// Its timer must not show the ended line again from a buf
				// that now holds other bytes (Python's unbuffered print
				// writes a line in several pieces).
				s.stopPartial()
			}
			n = copy(buf, buf[done:n])
			switch {
			case n == len(buf): // a line longer than maxLine: its first piece
				s.stopPartial()
				s.emit(buf[:n], afterCR, false)
				afterCR, n, drawn = false, 0, -1
			case n > 0 && afterCR && !s.raw && s.out != nil:
				s.redraw(buf[:n])
				drawn = n
			case n > 0 && !s.raw && s.out != nil:
				s.armPartial(buf[:n])
			}
		}
		if err != nil {
			s.stopPartial()
			if n > 0 {
				s.emit(buf[:n], afterCR, false)
			}
			if s.raw && s.out != nil && lastByte != '\n' && lastByte != '\r' {
				s.con.write(s.out, []byte{'\n'}) // as emit ends a last line
			}
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
	}
}

// pieceEnd is the length of b's first piece: through its first newline,
// or a carriage return not before one (a bar); -1 when b holds none.
func pieceEnd(b []byte) int {
	// Two IndexByte scans (vectorised) beat one IndexAny (a byte loop)
	// several times over on ordinary lines.
	nl := bytes.IndexByte(b, '\n')
	upTo := b
	if nl >= 0 {
		upTo = b[:nl]
	}
	switch cr := bytes.IndexByte(upTo, '\r'); {
	case cr >= 0 && cr+1 == nl:
		return nl + 1 // "\r\n" ends a line
	case cr >= 0:
		return cr + 1
	case nl >= 0:
		return nl + 1
	}
	return -1
}

// emit writes one piece to the tail and, unless raw or shown already, to
// the console, ended with a newline unless a line end ends it.
func (s *stream) emit(piece []byte, afterCR, shown bool) {
	barEnd := afterCR && len(piece) == 1 && piece[0] == '\n' // the newline after a bar
	if s.tail != nil && !barEnd {
		s.tail.add(piece)
	}
	if s.out == nil || s.raw || shown || (len(piece) == 1 && piece[0] == '\r') {
		return
	}
	last := piece[len(piece)-1]
	ended := last == '\n' || last == '\r'
	if s.shownPart > 0 { // the console shows its beginning (a prompt)
		var end []byte
		if !ended {
			end = []byte{'\n'}
		}
		s.con.partial(s, piece[min(s.shownPart, len(piece)):], end, true)
		s.shownPart = 0
		return
	}
	if s.prefix == "" && ended {
		s.con.write(s.out, piece)
		return
	}
	b := s.buf[:0]
	if !barEnd { // the newline after a bar ends it, unprefixed
		b = append(b, s.prefix...)
	}
	b = append(b, piece...)
	if !ended {
		b = append(b, '\n')
	}
	s.buf = b
	s.con.write(s.out, b)
}

// redraw shows a bar (text after a carriage return) and returns to its start.
func (s *stream) redraw(partial []byte) {
	b := append(s.buf[:0], s.prefix...)
	b = append(b, partial...)
	s.buf = append(b, '\r')
	s.con.write(s.out, s.buf)
}

// partialAfter is how long a line without its newline (a prompt: pdb's
// "(Pdb) ") waits before the console shows it; its rest continues it
// without a second prefix (issue 23).
const partialAfter = 100 * time.Millisecond

// endOpen ends the line another stream left open on the console. c.mu is held.
func (c *console) endOpen(s *stream) {
	if c.open != nil && c.open != s {
		_, _ = c.open.out.Write([]byte{'\n'})
		c.open = nil
	}
}

// partial writes more of s's partial line and end, prefixed unless it
// continues the open line; the line stays open unless finished. Nothing
// more of a line another stream has ended is a line already ended.
func (c *console) partial(s *stream, more, end []byte, finished bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.endOpen(s)
	var b []byte
	if c.open != s {
		if len(more) == 0 {
			return
		}
		b = append(b, s.prefix...)
	}
	_, _ = s.out.Write(append(append(b, more...), end...))
	c.open = s
	if finished {
		c.open = nil
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
		s.con.partial(s, s.pending[s.shownPart:], nil, false)
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

// logFaults tracks the run's log files whose writes failed: each is said
// when it happens and at the end with what was lost (issue 26).
type logFaults struct {
	say   func(string) // the console, not amdrun.log (which may be the file that fails)
	quiet bool         // -q: a fault is said only in the summary, not as a warning

	mu     sync.Mutex
	failed []*faultyLog
}

// wrap returns f as a log whose faults t reports.
func (t *logFaults) wrap(f *os.File) *faultyLog { return &faultyLog{f: f, t: t} }

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
