package launch

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/amdrun/amdrun/internal/plan"
)

// FRSignal makes a rank write torch's flight recorder (SIGRTMIN+8).
const FRSignal = StackSignal + 1

// frWait bounds the wait for the ranks' dumps, frReadTimeout the reader.
const (
	frWait        = 3 * time.Second
	frReadTimeout = 30 * time.Second
)

// frEnv points the bootstrap and torch's watchdog at attempt's files.
func (e *errorDir) frEnv(env []string, attempt int) []string {
	prefix := filepath.Join(e.Name(), fmt.Sprintf("fr.%d.", attempt))
	if v := plan.FRDumpFileVar(env); v != "" {
		env = plan.WithEnv(env, v, prefix)
	}
	return plan.WithEnv(env, "AMDRUN_FR", prefix)
}

// askFR asks every registered rank for its flight recorder and waits
// (frWait at most) until each wrote it.
func (st *stacker) askFR() {
	st.mu.Lock()
	ts := st.targets()
	attempt, dir := st.attempt, st.errs.Name()
	st.mu.Unlock()
	for _, t := range ts {
		_ = unix.Kill(t.pid, FRSignal)
	}
	for deadline := time.Now().Add(frWait); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if !slices.ContainsFunc(ts, func(t target) bool {
			_, err := os.Lstat(filepath.Join(dir, fmt.Sprintf("fr.%d.%d", attempt, t.rank)))
			return err != nil
		}) {
			return
		}
	}
}

// flightRecord reads attempt's dumps with the ranks' interpreter into
// FRSummary's paragraph, moving them to the log directory.
func (s *supervisor) flightRecord(attempt int) string {
	py := s.plan.Ranks[0].Argv[0]
	if !strings.HasPrefix(filepath.Base(py), "python") {
		return ""
	}
	names, _ := os.ReadDir(s.errs.Name())
	var files []*os.File
	var args []string
	for _, n := range names {
		m := frFileName.FindStringSubmatch(n.Name())
		if m == nil || m[1] != strconv.Itoa(attempt) || m[3] != "" {
			continue
		}
		fd, err := unix.Openat(int(s.errs.Fd()), n.Name(), unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err != nil {
			continue
		}
		f := os.NewFile(uintptr(fd), n.Name())
		defer f.Close()
		if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() || fi.Size() == 0 {
			continue
		}
		s.keepFile(fmt.Sprintf("fr_attempt_%d_rank_%s", attempt, m[2]), io.NewSectionReader(f, 0, 1<<30))
		_ = unix.Unlinkat(int(s.errs.Fd()), n.Name(), 0)
		args = append(args, fmt.Sprintf("%s=%d", n.Name(), 3+len(files)))
		files = append(files, f)
	}
	if len(files) == 0 {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), frReadTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, append([]string{"-I", "-c", frReader}, args...)...)
	cmd.ExtraFiles = files
	out, err := cmd.Output()
	if err != nil {
		return ""
	}
	ranks := make([]int, len(s.plan.Ranks))
	for i, r := range s.plan.Ranks {
		ranks[i] = r.Rank
	}
	return FRSummary(FRParse(string(out), frRankOf), ranks)
}
