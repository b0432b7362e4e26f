package launch

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestStallStopsSilentJob: two ranks that print nothing and answer no
// stacks (not Python) are found stalled after StallTimeout, reported as
// the group that wrote no stacks, the report kept in the log directory,
// and stopped: exit code 124 and a summary that says "stalled".
func TestStallStopsSilentJob(t *testing.T) {
	p, _ := workerPlan(t, 2, "hang")
	logs := t.TempDir()
	var out, errb syncBuffer
	start := time.Now()
	code, err := Run(context.Background(), p, RunOptions{Stdout: &out, Stderr: &errb, Self: self(t), Grace: time.Second,
		LogDir: logs, StallTimeout: time.Second, OnStall: StallStop})
	if code != StalledExitCode || err != nil {
		t.Fatalf("Run = %d, %v; stderr:\n%s", code, err, errb.String())
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("took %s", d)
	}
	msg := errb.String()
	for _, want := range []string{
		"amdrun: the job stalled: no rank wrote output, touched AMDRUN_HEARTBEAT or changed its stack for ",
		"; suspects: ranks 0,1\n",
		"ranks 0,1 (2 of 2) [odd]: wrote no stacks",
		"amdrun: stopping the worker group (--on-stall stop)\n",
		"amdrun: stalled (attempt 1 of 1): no progress for ",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("no %q in:\n%s", want, msg)
		}
	}
	kept, _ := filepath.Glob(filepath.Join(logs, "*", "stall_attempt_0_1.txt"))
	if len(kept) != 1 {
		t.Fatalf("stall reports kept: %v", kept)
	}
	if b, _ := os.ReadFile(kept[0]); !strings.Contains(string(b), "wrote no stacks") {
		t.Errorf("kept report:\n%s", b)
	}
}

// TestStallReportKeepsWaiting: with OnStall report the job is reported
// once and runs on; its own end decides the exit code.
func TestStallReportKeepsWaiting(t *testing.T) {
	p, _ := workerPlan(t, 1, "hang")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	var out, errb syncBuffer
	code, _ := Run(ctx, p, RunOptions{Stdout: &out, Stderr: &errb, Self: self(t), Grace: time.Second, StallTimeout: 500 * time.Millisecond})
	msg := errb.String()
	if strings.Count(msg, "amdrun: the job stalled") != 1 || !strings.Contains(msg, "amdrun: the job keeps running (--on-stall report)\n") {
		t.Errorf("reports:\n%s", msg)
	}
	if code == StalledExitCode || strings.Contains(msg, "amdrun: stalled") {
		t.Errorf("a reported stall ended the job as stalled: %d\n%s", code, msg)
	}
}

func TestSampleEvery(t *testing.T) {
	for _, tc := range []struct{ timeout, want time.Duration }{
		{time.Second, 100 * time.Millisecond}, {3 * time.Second, 150 * time.Millisecond},
		{30 * time.Minute, time.Minute}, {10 * time.Minute, 30 * time.Second},
	} {
		if got := sampleEvery(tc.timeout); got != tc.want {
			t.Errorf("sampleEvery(%s) = %s, want %s", tc.timeout, got, tc.want)
		}
	}
}
