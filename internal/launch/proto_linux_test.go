package launch

import (
	"bufio"
	"errors"
	"io"
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
