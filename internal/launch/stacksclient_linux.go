package launch

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Job is a running amdrun launch that answers `amdrun stacks`.
type Job struct {
	PID int // the launching amdrun's
	UID int // its owner's
	dir string
}

// RunningJobs lists the running launches whose private directory is in
// errorDirBase or /tmp.
func RunningJobs() []Job {
	var out []Job
	seen := map[string]bool{}
	for _, base := range []string{errorDirBase(), "/tmp"} {
		ents, _ := os.ReadDir(base)
		for _, e := range ents {
			pid, start, ok := dirOwner(e.Name())
			path := filepath.Join(base, e.Name())
			if !ok || seen[path] || ownerGone(pid, start) {
				continue
			}
			seen[path] = true
			var st syscall.Stat_t
			if syscall.Lstat(path, &st) != nil || st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
				continue
			}
			out = append(out, Job{PID: pid, UID: int(st.Uid), dir: path})
		}
	}
	return out
}

// FindJob picks the job of launcher pid (0: the caller's only running
// job) among RunningJobs, or says in one line why there is none.
func FindJob(pid int) (Job, error) {
	me := os.Geteuid()
	var mine []Job
	for _, j := range RunningJobs() {
		if pid != 0 && j.PID == pid {
			if j.UID != me && me != 0 {
				return j, fmt.Errorf("job %d belongs to %s: %w", pid, userName(j.UID), ErrNotOwner)
			}
			return j, nil
		}
		if j.UID == me {
			mine = append(mine, j)
		}
	}
	switch {
	case pid != 0:
		var st syscall.Stat_t
		if syscall.Stat(fmt.Sprintf("/proc/%d", pid), &st) == nil && int(st.Uid) != me && me != 0 {
			return Job{}, fmt.Errorf("pid %d belongs to %s: %w", pid, userName(int(st.Uid)), ErrNotOwner)
		}
		return Job{}, fmt.Errorf("no running amdrun job has pid %d", pid)
	case len(mine) == 0:
		return Job{}, errors.New("no running amdrun job of yours")
	case len(mine) > 1:
		pids := make([]string, len(mine))
		for i, j := range mine {
			pids[i] = strconv.Itoa(j.PID)
		}
		return Job{}, fmt.Errorf("%d running amdrun jobs of yours (pids %s): name one", len(mine), strings.Join(pids, ", "))
	}
	return mine[0], nil
}

func userName(uid int) string {
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		return "user " + u.Username
	}
	return fmt.Sprintf("uid %d", uid)
}

// AskStacks asks job for every rank's stacks (WriteStacks' text); native
// adds native frames through py-spy, where the job finds it.
func AskStacks(j Job, native bool) (string, error) {
	c, err := net.DialTimeout("unix", filepath.Join(j.dir, ctlSocket), 2*time.Second)
	if err != nil {
		if errors.Is(err, os.ErrPermission) {
			return "", fmt.Errorf("job %d: %w", j.PID, ErrNotOwner)
		}
		return "", fmt.Errorf("job %d does not answer: %w", j.PID, err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	ask := "stacks\n"
	if native {
		ask = "stacks native\n"
	}
	if _, err := io.WriteString(c, ask); err != nil {
		return "", fmt.Errorf("job %d: %w", j.PID, err)
	}
	r := bufio.NewReader(c)
	status, err := r.ReadString('\n')
	if err != nil {
		return "", fmt.Errorf("job %d does not answer: %w", j.PID, err)
	}
	if msg, ok := strings.CutPrefix(status, "error "); ok {
		return "", fmt.Errorf("job %d: %s", j.PID, strings.TrimSpace(msg))
	}
	b, err := io.ReadAll(io.LimitReader(r, 64<<20))
	return string(b), err
}
