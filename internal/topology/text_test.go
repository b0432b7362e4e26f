package topology

import (
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
)

func TestParseErrorMessage(t *testing.T) {
	tests := []struct {
		err  *ParseError
		want string
	}{
		{&ParseError{Source: "rocm-smi", Err: ErrNoDevices}, "rocm-smi: no GPU devices found"},
		{&ParseError{Source: "rocm-smi", Line: 3, Err: ErrSyntax}, "rocm-smi: line 3: malformed input"},
		// Column is 0-based in the struct, printed 1-based as editors count.
		{&ParseError{Source: "rocm-smi", Line: 3, Column: 7, Err: ErrBadNumber}, "rocm-smi: line 3, column 8: not a number"},
		// A column without a line says nothing useful.
		{&ParseError{Source: "rocm-smi", Column: 7, Err: ErrSyntax}, "rocm-smi: malformed input"},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("%#v: %q, want %q", tt.err, got, tt.want)
		}
	}
}

func TestLineReader(t *testing.T) {
	type line struct {
		n          int
		text       string
		terminated bool
	}
	tests := []struct {
		name string
		in   string
		want []line
	}{
		{"empty", "", nil},
		{"lf", "a\nb\n", []line{{1, "a", true}, {2, "b", true}}},
		{"crlf and blank", "a\r\n\r\nc\r\n", []line{{1, "a", true}, {2, "", true}, {3, "c", true}}},
		{"cut short", "a\nbc", []line{{1, "a", true}, {2, "bc", false}}},
		{"cut short after cr", "a\r\nb\r", []line{{1, "a", true}, {2, "b", false}}},
	}
	for _, tt := range tests {
		lr := NewLineReader(strings.NewReader(tt.in), "tool")
		var got []line
		for lr.Next() {
			got = append(got, line{lr.Line(), lr.Text(), lr.Terminated()})
		}
		if err := lr.Err(); err != nil {
			t.Errorf("%s: %v", tt.name, err)
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: got %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

func TestLineReaderErrors(t *testing.T) {
	lr := NewLineReader(strings.NewReader("ok\n"+strings.Repeat("x", MaxLineLength+1)+"\n"), "tool")
	for lr.Next() {
	}
	want := &ParseError{Source: "tool", Line: 2, Err: ErrSyntax}
	var pe *ParseError
	if err := lr.Err(); !errors.As(err, &pe) || pe.Line != want.Line || pe.Source != want.Source || !errors.Is(err, ErrSyntax) {
		t.Errorf("long line: %v, want %v", err, want)
	}

	lr = NewLineReader(iotest.ErrReader(io.ErrUnexpectedEOF), "tool")
	if lr.Next() {
		t.Fatal("a line from a failing reader")
	}
	if err := lr.Err(); err == nil || err.Error() != "tool: unexpected EOF" || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("read error: %v", err)
	}

	lr = NewLineReader(strings.NewReader("a\nb\n"), "tool")
	lr.Next()
	lr.Next()
	err := lr.Errorf(4, ErrBadNumber, "cell %q", "x")
	if !reflect.DeepEqual(err, &ParseError{Source: "tool", Line: 2, Column: 4, Err: err.(*ParseError).Err}) ||
		err.Error() != `tool: line 2, column 5: not a number: cell "x"` || !errors.Is(err, ErrBadNumber) {
		t.Errorf("Errorf: %#v %q", err, err)
	}
	if err := NewParseError(lr.Source, 0, 0, ErrNoDevices, ""); err.Error() != "tool: no GPU devices found" {
		t.Errorf("NewParseError: %q", err)
	}
}

func TestLineReaderLineEnds(t *testing.T) {
	lr := NewLineReader(strings.NewReader("a\r\n\nb"), "tool")
	var got []string
	for lr.Next() {
		got = append(got, lr.Text())
	}
	if err := lr.Err(); err != nil || !reflect.DeepEqual(got, []string{"a", "", "b"}) || lr.Terminated() {
		t.Errorf("got %q %v, last line terminated %v", got, err, lr.Terminated())
	}
}

func TestLineReaderForEach(t *testing.T) {
	lr := NewLineReader(strings.NewReader("a\nb\nc\n"), "tool")
	var seen []string
	err := lr.ForEach(func(line string) error {
		seen = append(seen, line)
		if line == "b" {
			return lr.Errorf(0, ErrSyntax, "stop")
		}
		return nil
	})
	if err == nil || err.Error() != "tool: line 2: malformed input: stop" || !reflect.DeepEqual(seen, []string{"a", "b"}) {
		t.Errorf("ForEach: %v after %q", err, seen)
	}
	lr = NewLineReader(strings.NewReader("a\nb"), "tool")
	if err := lr.ForEach(func(string) error { return nil }); err != nil || lr.Line() != 2 {
		t.Errorf("ForEach to the end: %v at line %d", err, lr.Line())
	}
}

func TestLineReaderUnread(t *testing.T) {
	lr := NewLineReader(strings.NewReader("a\nb\nc"), "tool")
	var got []string
	unread := map[string]bool{}
	for lr.Next() {
		got = append(got, fmt.Sprintf("%d:%s", lr.Line(), lr.Text()))
		if !unread[lr.Text()] {
			unread[lr.Text()] = true
			lr.Unread()
			lr.Unread() // a second one in a row does nothing
			if want := len(unread) - 1; lr.Line() != want {
				t.Fatalf("after Unread, Line = %d, want %d", lr.Line(), want)
			}
		}
	}
	if want := []string{"1:a", "1:a", "2:b", "2:b", "3:c", "3:c"}; !reflect.DeepEqual(got, want) {
		t.Errorf("lines %q, want %q", got, want)
	}
	lr.Unread() // at the end of input: nothing to hand back
	if lr.Next() || lr.Line() != 3 {
		t.Errorf("Unread after the end gave a line (Line %d)", lr.Line())
	}
}
