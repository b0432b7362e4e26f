package pscmd

import (
	"strings"
	"testing"
	"time"

	"github.com/amdrun/amdrun/internal/launch/lease"
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
		{lease.Holder{PID: 7, UID: 9, User: "m\x1b[31m", Command: "x\x1b]0;t\x07" + strings.Repeat("y", 300)},
			`pid 7, user m\x1b[31m: x\x1b]0;t\x07` + strings.Repeat("y", 120-3-len(`x\x1b]0;t\x07`)) + "..."},
	} {
		if got := detail(&tt.h); got != tt.want {
			t.Errorf("detail(%+v)\n got %q\nwant %q", tt.h, got, tt.want)
		}
	}
}
