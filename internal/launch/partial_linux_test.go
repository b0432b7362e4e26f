package launch

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/amdrun/amdrun/internal/testutil"
)

// TestRunShowsPartialPrompt: with two prefixed ranks on a terminal, rank
// 0's prompt without a newline (input("continue? ")) shows while the rank
// still waits for its answer, prefixed once; the rest of the line, when
// it comes, continues it without a second prefix (issue 23). Before, the
// prompt showed only once the line was ended.
func TestRunShowsPartialPrompt(t *testing.T) {
	testutil.EndToEnd(t)
	m, tty := testutil.OpenPTY(t)
	scr := readScreen(m)
	p, dir := workerPlan(t, 2, "prompt")
	done := make(chan error, 1)
	go func() {
		code, err := Run(context.Background(), p, RunOptions{Stdout: tty, Stderr: tty, Prefix: true})
		if err == nil && code != 0 {
			err = os.ErrInvalid
		}
		done <- err
	}()
	// The rank is still waiting for DIR/go: nothing has ended its line.
	scr.waitFor(t, "[rank0]: continue? ")
	os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	scr.waitFor(t, "[rank0]: continue? yes\r\n")
	if n := strings.Count(scr.buf.String(), "[rank0]:"); n != 1 {
		t.Errorf("rank 0's line is prefixed %d times: %q", n, scr.buf.String())
	}
}

// TestPartialLineEndedByAnotherRank: a partial line another rank's line
// interrupts is ended first, and its continuation is prefixed again, so
// that no line holds two ranks' text.
func TestPartialLineEndedByAnotherRank(t *testing.T) {
	con := &console{}
	out := newBuf(0)
	a := &stream{con: con, out: out, prefix: "[rank0]: "}
	b := &stream{con: con, out: out, prefix: "[rank1]: "}
	a.mu.Lock()
	a.armPartial([]byte("continue? "))
	a.mu.Unlock()
	a.showPending()
	b.emit([]byte("loss 1.0\n"), false, false)
	a.mu.Lock()
	a.stopPartial()
	a.emit([]byte("continue? yes\n"), false, false)
	a.mu.Unlock()
	want := "[rank0]: continue? \n[rank1]: loss 1.0\n[rank0]: yes\n"
	if got := out.String(); got != want {
		t.Errorf("console %q, want %q", got, want)
	}
}

// TestEndedLineIsNotShownAgain: a line that arrives in two reads ("rank 0
// prefix" then " /usr sum 2.0\n", as Python's unbuffered print writes it)
// leaves no partial pending once it is ended, so the timer cannot show
// its stale beginning a second time. Before, it did ("[rank0]: rank 0
// prefix /usr sum 2.0", then "[rank0]: rank 0 prefix" 100 ms later).
func TestEndedLineIsNotShownAgain(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	out := newBuf(0)
	s := &stream{con: &console{}, out: out, prefix: "[rank0]: "}
	done := make(chan struct{})
	go func() { s.pump(r); close(done) }()
	w.Write([]byte("rank 0 prefix"))
	// The first read has been taken in as a partial line.
	for pending := 0; pending == 0; {
		s.mu.Lock()
		pending = len(s.pending)
		s.mu.Unlock()
	}
	w.Write([]byte(" /usr sum 2.0\n"))
	for !strings.Contains(out.String(), "sum 2.0\n") {
	}
	s.mu.Lock()
	left := len(s.pending)
	s.mu.Unlock()
	w.Close()
	<-done
	if left != 0 {
		t.Errorf("%d bytes of an ended line still pending for the timer", left)
	}
	if n := strings.Count(out.String(), "rank 0 prefix"); n != 1 {
		t.Errorf("the line shows %d times: %q", n, out.String())
	}
}

// TestPartialLineEndedAtEOF: a rank's last line without a newline
// ("rank 0 done", shown by the timer) that another rank's line ended
// before the rank's pipe closed gets no second, empty line at the end.
// Before, it did: TestRunUnprefixedLastLineEnded saw "rank 0 done\nrank 1
// done\n\n" under load, when the timer fired before the pipe closed.
func TestPartialLineEndedAtEOF(t *testing.T) {
	for _, prefix := range []string{"", "[rank0]: "} {
		con := &console{}
		out := newBuf(0)
		a := &stream{con: con, out: out, prefix: prefix}
		b := &stream{con: con, out: out}
		a.mu.Lock()
		a.armPartial([]byte("rank 0 done"))
		a.mu.Unlock()
		a.showPending()
		b.emit([]byte("rank 1 done"), false, false)
		a.mu.Lock()
		a.stopPartial()
		a.emit([]byte("rank 0 done"), false, false) // what pump emits at EOF
		a.mu.Unlock()
		if want := prefix + "rank 0 done\nrank 1 done\n"; out.String() != want {
			t.Errorf("prefix %q: console %q, want %q", prefix, out.String(), want)
		}
	}
}
