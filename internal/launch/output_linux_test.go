package launch

import (
	"bytes"
	"io"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

// writes is a console destination that hands each write to the test as
// it happens.
type writes struct {
	ch chan string
}

func (w *writes) Write(p []byte) (int, error) {
	w.ch <- string(p)
	return len(p), nil
}

// pumpSteps runs a stream over a pipe: for each step it writes in, then
// expects exactly the console writes out, in order, before the next step
// writes anything: what reaches the console without waiting for more
// output. It returns the log and the tail.
func pumpSteps(t *testing.T, st *stream, steps [][2][]string) (string, []string) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	out := &writes{ch: make(chan string, 16)}
	log := &syncBuffer{}
	st.con, st.out, st.log, st.tail = &console{}, out, log, &tail{}
	done := make(chan struct{})
	go func() { st.pump(r); close(done) }()
	next := func(want string) {
		t.Helper()
		select {
		case got := <-out.ch:
			if got != want {
				t.Fatalf("console got %q, want %q", got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("console got nothing, want %q", want)
		}
	}
	for _, step := range steps {
		for _, in := range step[0] {
			if in == "EOF" {
				w.Close()
				continue
			}
			if _, err := w.WriteString(in); err != nil {
				t.Fatal(err)
			}
		}
		for _, want := range step[1] {
			next(want)
		}
	}
	w.Close()
	<-done
	select {
	case extra := <-out.ch:
		t.Fatalf("console got %q more", extra)
	default:
	}
	return log.String(), st.tail.get()
}

// TestStreamCarriageReturns: with prefixes, a piece that a carriage
// return ends is shown at once, and text after a carriage return (tqdm's
// "\r 10%|#") is drawn as it comes, without waiting for a newline
// (issue 15); the log gets the bytes unchanged and the tail only lines.
func TestStreamCarriageReturns(t *testing.T) {
	type step = [2][]string
	in := func(s ...string) []string { return s }
	log, tl := pumpSteps(t, &stream{prefix: "[rank0]: "}, []step{
		{in("step 1\r"), in("[rank0]: step 1\r")},
		{in("step 2\r"), in("[rank0]: step 2\r")},
		{in("\n"), in("\n")}, // ends the bar, no prefix alone on a line
		{in("\r 10%|#"), in("[rank0]:  10%|#\r")},
		{in("#"), in("[rank0]:  10%|##\r")},
		{in("\r 20%|###"), in("[rank0]:  20%|###\r")}, // " 10%|##\r" was drawn already
		{in("\n"), in("[rank0]:  20%|###\n")},
		{in("(Pdb) "), nil}, // a partial line with no carriage return waits
		{in("next\r\n"), in("[rank0]: (Pdb) next\r\n")},
		{in("last"), nil},
		{in("EOF"), in("[rank0]: last\n")},
	})
	if want := "step 1\rstep 2\r\n\r 10%|##\r 20%|###\n(Pdb) next\r\nlast"; log != want {
		t.Errorf("log %q, want %q", log, want)
	}
	if want := []string{" 20%|###", "(Pdb) next", "last"}; !reflect.DeepEqual(tl, want) {
		t.Errorf("tail %q, want %q", tl, want)
	}
}

// TestStreamRaw: the only rank shown, unprefixed, reaches the console
// byte for byte as it writes (a prompt without newline included); a last
// line is ended.
func TestStreamRaw(t *testing.T) {
	type step = [2][]string
	in := func(s ...string) []string { return s }
	log, tl := pumpSteps(t, &stream{raw: true}, []step{
		{in("(Pdb) "), in("(Pdb) ")},
		{in("p x\n3\n"), in("p x\n3\n")},
		{in("\r 50%|#"), in("\r 50%|#")},
		{in("EOF"), in("\n")},
	})
	if log != "(Pdb) p x\n3\n\r 50%|#" {
		t.Errorf("log %q", log)
	}
	if want := []string{"(Pdb) p x", "3", " 50%|#"}; !reflect.DeepEqual(tl, want) {
		t.Errorf("tail %q, want %q", tl, want)
	}
}

// TestStreamLongLine: a line longer than maxLine reaches the console in
// pieces of maxLine, each ended when prefixed.
func TestStreamLongLine(t *testing.T) {
	type step = [2][]string
	long := strings.Repeat("x", maxLine+10)
	_, tl := pumpSteps(t, &stream{prefix: "[rank1]: "}, []step{
		{[]string{long, "\n"}, []string{"[rank1]: " + long[:maxLine] + "\n", "[rank1]: xxxxxxxxxx\n"}},
	})
	if len(tl) != 2 || len(tl[0]) != maxLine || tl[1] != "xxxxxxxxxx" {
		t.Errorf("tail: %d lines", len(tl))
	}
}

func TestPieceEnd(t *testing.T) {
	for in, want := range map[string]int{
		"": -1, "abc": -1, "a\nb": 2, "a\r\nb": 3, "a\rb": 2, "a\r": 2, "\r": 1, "\n": 1, "\r\r\n": 1,
	} {
		if got := pieceEnd([]byte(in)); got != want {
			t.Errorf("pieceEnd(%q) = %d, want %d", in, got, want)
		}
	}
}

// BenchmarkStreamPump copies 16 MiB of 80-byte lines through a pipe to a
// prefixed console, a log and a tail: the cost amdrun adds to a chatty
// rank's output.
func BenchmarkStreamPump(b *testing.B) {
	line := []byte(strings.Repeat("x", 79) + "\n")
	chunk := bytes.Repeat(line, 64<<10/len(line))
	const total = 16 << 20
	b.SetBytes(total)
	for b.Loop() {
		r, w, err := os.Pipe()
		if err != nil {
			b.Fatal(err)
		}
		st := &stream{con: &console{}, out: io.Discard, prefix: "[rank3]: ", log: io.Discard, tail: &tail{}}
		done := make(chan struct{})
		go func() { st.pump(r); close(done) }()
		for n := 0; n < total; n += len(chunk) {
			w.Write(chunk)
		}
		w.Close()
		<-done
	}
}
