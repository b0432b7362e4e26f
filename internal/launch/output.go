package launch

import (
	"bufio"
	"errors"
	"io"
	"os"
	"sync"
)

// maxLine is the longest line written in one piece; a longer line is cut
// into pieces of this size, each ended with a newline when prefixed.
const maxLine = 64 << 10

// tailLines is how many stderr lines a failure summary shows per rank.
const tailLines = 10

// console serializes whole lines onto the user's streams, so that lines
// of different ranks never interleave mid-line.
type console struct {
	mu sync.Mutex
}

func (c *console) write(w io.Writer, b []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, _ = w.Write(b) // a console that fails must not stop the workers
}

// tail keeps the last lines of a stream.
type tail struct {
	mu    sync.Mutex
	lines []string
}

func (t *tail) add(line []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for len(line) > 0 && (line[len(line)-1] == '\n' || line[len(line)-1] == '\r') {
		line = line[:len(line)-1]
	}
	t.lines = append(t.lines, string(line))
	if len(t.lines) > tailLines {
		t.lines = t.lines[len(t.lines)-tailLines:]
	}
}

func (t *tail) get() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.lines...)
}

// stream copies one worker pipe, line by line, to the console (with an
// optional prefix), a log file and a tail.
type stream struct {
	con    *console
	out    io.Writer // console destination; nil: not shown
	prefix string    // "" for none
	log    io.Writer // nil: no log file
	tail   *tail     // nil: not kept
}

// pump reads r until EOF or error (a read deadline ends it) and closes r.
func (s *stream) pump(r *os.File) {
	defer r.Close()
	br := bufio.NewReaderSize(r, maxLine)
	buf := make([]byte, 0, 256)
	for {
		line, err := br.ReadSlice('\n')
		last := err != nil && !errors.Is(err, bufio.ErrBufferFull)
		if len(line) > 0 {
			s.emit(line, last, &buf)
		}
		if last {
			return
		}
	}
}

// emit writes one line, or one piece of a longer line, or (last) the
// stream's final bytes. On the console a prefixed piece and a final line
// are always ended with a newline, so that the next rank's output starts
// a line of its own; the log file gets the bytes unchanged.
func (s *stream) emit(line []byte, last bool, buf *[]byte) {
	if s.log != nil {
		_, _ = s.log.Write(line)
	}
	if s.tail != nil {
		s.tail.add(line)
	}
	if s.out == nil {
		return
	}
	ended := line[len(line)-1] == '\n'
	if s.prefix == "" && (ended || !last) {
		s.con.write(s.out, line)
		return
	}
	b := append((*buf)[:0], s.prefix...)
	b = append(b, line...)
	if !ended {
		b = append(b, '\n')
	}
	*buf = b
	s.con.write(s.out, b)
}
