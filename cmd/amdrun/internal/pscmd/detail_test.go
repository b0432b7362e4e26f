package pscmd

import (
	"strings"
	"testing"
	"time"

	"github.com/amdrun/amdrun/internal/lease"
)

// TestDetail: what the table shows of a holder is escaped and cut here
// too, whoever built the Holder, and nothing unknown is made up.
func TestDetail(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.Local)
	for _, tt := range []struct {
		h    lease.Holder
		want string
	}{
		{lease.Holder{PID: 42, UID: 1001, User: "alice", Start: start, Command: "amdrun -n 2 train.py"},
			"pid 42, user alice, started 2026-01-02 03:04:05: amdrun -n 2 train.py"},
		{lease.Holder{PID: 42, UID: 1001}, "pid 42, uid 1001"},
		{lease.Holder{PID: 42, UID: -1, Gone: true}, "pid 42 (exited; the job's processes keep the lease)"},
		{lease.Holder{UID: -1}, "held by a process this node does not show"},
		{lease.Holder{PID: 50, UID: 1002, User: "bob", Command: "/bin/sleep 120", Locker: 42, Outside: true},
			"pid 50, user bob: /bin/sleep 120 [outside the job: not an amdrun process; pid 42 took the lease]"},
		{lease.Holder{PID: 51, UID: 0, User: "root", Command: "amdrun __amdrun_keeper", Locker: 42},
			"pid 51, user root: amdrun __amdrun_keeper [amdrun's, keeping the lease pid 42 took]"},
		{lease.Holder{PID: 42, UID: 1002, User: "bob", Unverified: true},
			"pid 42, user bob [the pid that took it, as /proc/locks says; only root can check that it still holds it]"},
		{lease.Holder{UID: -1, Locker: 42},
			"held by a process this user cannot see (pid 42 took it and holds it no more; the process it went to is not visible to this user)"},
		{lease.Holder{PID: 7, UID: 9, User: "m\x1b[31m", Command: "x\x1b]0;t\x07" + strings.Repeat("y", 300)},
			`pid 7, user m\x1b[31m: x\x1b]0;t\x07` + strings.Repeat("y", 120-3-len(`x\x1b]0;t\x07`)) + "..."},
	} {
		if got := detail(&tt.h); got != tt.want {
			t.Errorf("detail(%+v)\n got %q\nwant %q", tt.h, got, tt.want)
		}
	}
}

// TestPrintQueue: on a terminal ps lists the waiting jobs, oldest first,
// with user (escaped), pid, devices and since when.
func TestPrintQueue(t *testing.T) {
	since := time.Date(2026, 12, 2, 1, 2, 3, 0, time.Local)
	var b strings.Builder
	if err := printQueue(&b, nil); err != nil || b.Len() != 0 {
		t.Errorf("empty queue printed %q, %v", b.String(), err)
	}
	q := []lease.Waiting{{PID: 42, UID: 1001, User: "alice", Need: 8, Since: since}, {PID: 43, UID: 1002, User: "e\x1b[2J", Need: 2, Since: since.Add(time.Second)}}
	if err := printQueue(&b, q); err != nil {
		t.Fatal(err)
	}
	want := "\nQUEUE  USER      PID  DEVICES  SINCE\n" +
		"1      alice     42   8        2026-12-02 01:02:03\n" +
		"2      e\\x1b[2J  43   2        2026-12-02 01:02:04\n"
	if b.String() != want {
		t.Errorf("printQueue:\n%s\nwant:\n%s", b.String(), want)
	}
}
