package launch

import (
	"os"
	"strings"
	"testing"
)

// TestFaultyLogSaysOnce: writes to /dev/full fail with ENOSPC; the log
// says so once, counts every byte lost after, and never fails the
// writer (the output copy goes on).
func TestFaultyLogSaysOnce(t *testing.T) {
	f, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skip(err)
	}
	var said []string
	tr := &logFaults{say: func(m string) { said = append(said, m) }}
	l := tr.wrap(f)
	defer f.Close()
	for _, b := range []string{"hello\n", "world\n", "!"} {
		if n, err := l.Write([]byte(b)); n != len(b) || err != nil {
			t.Errorf("Write(%q) = %d, %v", b, n, err)
		}
	}
	if len(said) != 1 || said[0] != "amdrun: warning: writing /dev/full failed: no space left on device: the rest of it is lost (the job goes on)\n" {
		t.Errorf("said %q", said)
	}
	tr.summary()
	if len(said) != 2 || said[1] != "amdrun: the logs are incomplete: /dev/full (13 bytes lost: no space left on device)\n" {
		t.Errorf("summary %q", said[len(said)-1])
	}
	quiet := &logFaults{say: func(m string) { t.Errorf("said %q with no fault", m) }}
	quiet.summary()
	// -q: the fault is said once, in the summary only (issue 31).
	said = nil
	tr = &logFaults{say: func(m string) { said = append(said, m) }, quiet: true}
	l2 := tr.wrap(f)
	l2.Write([]byte("x"))
	tr.summary()
	if len(said) != 1 || !strings.HasPrefix(said[0], "amdrun: the logs are incomplete: /dev/full") {
		t.Errorf("-q: said %q, want only the summary", said)
	}
	if !strings.Contains(said[0], "/dev/full") {
		t.Error("the warning does not name the file")
	}
}
