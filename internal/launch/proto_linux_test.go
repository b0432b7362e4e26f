package launch

import (
	"bufio"
	"errors"
	"io"
	"reflect"
	"strings"
	"syscall"
	"testing"
)

func TestGuardMsgRoundTrip(t *testing.T) {
	for _, m := range []guardMsg{
		{Kind: msgPid, Pid: 1},
		{Kind: msgPid, Pid: 4194304},
		{Kind: msgStatus, Status: 0},
		{Kind: msgStatus, Status: syscall.WaitStatus(3 << 8)},     // exit 3
		{Kind: msgStatus, Status: syscall.WaitStatus(9)},          // SIGKILL
		{Kind: msgStatus, Status: syscall.WaitStatus(0x8b)},       // SIGSEGV, core dumped
		{Kind: msgStatus, Status: syscall.WaitStatus(0xffffffff)}, // every bit
	} {
		got, err := decodeReport(string(m.encode()))
		if err != nil || got != m {
			t.Errorf("decode(encode(%+v)) = %+v, %v", m, got, err)
		}
	}
	// Several on one pipe, as a guard writes them, then EOF.
	r := bufio.NewReader(strings.NewReader("pid 42\nstatus 256\n"))
	if m, err := readReport(r); err != nil || m != (guardMsg{Kind: msgPid, Pid: 42}) {
		t.Errorf("first: %+v, %v", m, err)
	}
	if m, err := readReport(r); err != nil || m.Kind != msgStatus || m.Status.ExitStatus() != 1 {
		t.Errorf("second: %+v, %v", m, err)
	}
	if _, err := readReport(r); err != io.EOF {
		t.Errorf("after the last: %v, want io.EOF", err)
	}
	// A guard killed halfway through a line said nothing.
	if _, err := readReport(bufio.NewReader(strings.NewReader("stat"))); !errors.Is(err, errReport) {
		t.Errorf("cut line: %v", err)
	}
}

func TestDecodeReportRefuses(t *testing.T) {
	for _, line := range []string{
		"", "\n", "pid", "pid ", "pid 0", "pid -3", "pid +3", "pid 03", "pid 3 4", "pid 99999999999999999999",
		"status", "status -1", "status 4294967296", "status 0x10", "status 1 ", "Pid 3", "exit 0",
		"pid 3\r", strings.Repeat("9", 100),
	} {
		if m, err := decodeReport(line); !errors.Is(err, errReport) {
			t.Errorf("decodeReport(%q) = %+v, %v; want an errReport", line, m, err)
		}
	}
}

func TestControlBytes(t *testing.T) {
	if ack, _ := ctlDecode(ctlAck); !ack {
		t.Error("ctlAck is not an ack")
	}
	for _, sig := range DefaultSignals {
		s := sig.(syscall.Signal)
		if ack, got := ctlDecode(ctlSignal(s)); ack || got != s {
			t.Errorf("ctlDecode(ctlSignal(%v)) = %v, %v", s, ack, got)
		}
	}
}

func TestKeeperStatus(t *testing.T) {
	if err := decodeKeeperStatus(string(encodeKeeperStatus(nil))); err != nil {
		t.Errorf("ok decodes as %v", err)
	}
	err := decodeKeeperStatus(string(encodeKeeperStatus(errors.New("mounting /proc: permission denied\nsecond line"))))
	if err == nil || err.Error() != "mounting /proc: permission denied second line" {
		t.Errorf("failure decodes as %v", err)
	}
	if err := decodeKeeperStatus(""); err == nil || !strings.Contains(err.Error(), "exited before it was ready") {
		t.Errorf("nothing decodes as %v", err)
	}
}

// FuzzDecodeReport: no line panics, and every line that decodes is
// exactly what encoding its message writes.
func FuzzDecodeReport(f *testing.F) {
	for _, s := range []string{"pid 42\n", "status 0\n", "status 4294967295", "pid 0", "x", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		m, err := decodeReport(line)
		if err != nil {
			return
		}
		if got := string(m.encode()); got != strings.TrimSuffix(line, "\n")+"\n" {
			t.Errorf("decodeReport(%q) = %+v, which encodes as %q", line, m, got)
		}
	})
}

func TestStartRequestRoundTrip(t *testing.T) {
	for _, r := range []startRequest{
		{Argv: []string{"/bin/amdrun", "__amdrun_bind", "--guard", "--", "python3", "t.py"}, Env: []string{"RANK=0", "X=a b\tc"}, Dir: "/home/u/w", Stdin: true},
		{Argv: []string{"/x"}},
	} {
		b, err := r.encode()
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodeStartRequest(b)
		if err != nil || !reflect.DeepEqual(got, r) {
			t.Errorf("decode(encode(%+v)) = %+v, %v", r, got, err)
		}
		if r.startFDs() != map[bool]int{true: 5, false: 4}[r.Stdin] {
			t.Errorf("%+v: %d descriptors", r, r.startFDs())
		}
	}
	for _, b := range []string{``, `{}`, `{"argv": []}`, `{"argv": [""]}`, `{"argv": ["a\u0000b"]}`, `{"argv": ["a"], "env": ["X=\u0000"]}`, `[1]`, `{"argv": "x"}`} {
		if r, err := decodeStartRequest([]byte(b)); err == nil {
			t.Errorf("decodeStartRequest(%q) = %+v, want an error", b, r)
		}
	}
	if _, err := (startRequest{Argv: []string{"x"}, Env: []string{strings.Repeat("y", maxStartMsg)}}).encode(); err == nil {
		t.Error("a request over maxStartMsg encodes")
	}
	for _, c := range []struct {
		r    startReply
		pid  int
		fail string
	}{{startReply{Pid: 7}, 7, ""}, {startReply{Error: "fork/exec /x: no such file or directory"}, 0, "fork/exec /x: no such file or directory"}, {startReply{}, 0, "keeper: reply without a pid"}} {
		pid, err := decodeStartReply(c.r.encode())
		if pid != c.pid || (err == nil) != (c.fail == "") || (err != nil && err.Error() != c.fail) {
			t.Errorf("decodeStartReply(%+v) = %d, %v", c.r, pid, err)
		}
	}
}

// FuzzDecodeStartRequest: no message panics; one that decodes has a
// command and encodes again to a message that decodes the same.
func FuzzDecodeStartRequest(f *testing.F) {
	for _, s := range []string{`{"argv":["/bin/amdrun"],"env":["A=1"],"dir":"/","stdin":true}`, `{}`, `{"argv":[""]}`, `null`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeStartRequest(b)
		if err != nil {
			return
		}
		if len(r.Argv) == 0 || r.Argv[0] == "" {
			t.Fatalf("decoded %q without a command", b)
		}
		enc, err := r.encode()
		if err != nil {
			return // too large once re-encoded (escapes)
		}
		again, err := decodeStartRequest(enc)
		if err != nil || !reflect.DeepEqual(again, r) {
			t.Errorf("%q: decoded %+v, again %+v, %v", b, r, again, err)
		}
	})
}

// FuzzDecodeStartReply: no reply panics, and a pid comes only without an
// error and positive.
func FuzzDecodeStartReply(f *testing.F) {
	for _, s := range []string{`{"pid":3}`, `{"error":"x"}`, `{}`, `{"pid":-1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		pid, err := decodeStartReply(b)
		if (err == nil) != (pid > 0) {
			t.Errorf("%q: pid %d, err %v", b, pid, err)
		}
	})
}
