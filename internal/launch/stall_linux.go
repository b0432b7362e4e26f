package launch

import (
	"bufio"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

type stallReport struct {
	groups   []StackGroup
	suspects []int
	quiet    time.Duration
}

// sampleEvery is how often the stall watch samples: a twentieth of the
// timeout, between 100 ms and a minute.
func sampleEvery(timeout time.Duration) time.Duration {
	return min(max(timeout/20, 100*time.Millisecond), time.Minute)
}

// watchStalls reports to out, once per stall, when for StallTimeout no
// rank wrote output, touched its heartbeat, changed its stacks or was
// importing, and no silent rank used CPU.
func (s *supervisor) watchStalls(stop <-chan struct{}, out chan<- stallReport) {
	timeout := s.o.StallTimeout
	tick := time.NewTicker(sampleEvery(timeout))
	defer tick.Stop()
	progress := time.Now()
	var last map[int]string
	reported := false
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		sample, busy := s.stacks.take()
		now := time.Now()
		keys := map[int]string{}
		loading := false
		for _, r := range sample {
			ts := ParseDump(r.Dump)
			keys[r.Rank] = key(ts)
			loading = loading || importing(ts)
		}
		if last == nil || loading || busy || !maps.Equal(keys, last) {
			progress = now
		}
		last = keys
		if a := time.Unix(0, s.activity.Load()); a.After(progress) {
			progress = a
		}
		if hb := s.stacks.heartbeats(); hb.After(progress) {
			progress = hb
		}
		if now.Sub(progress) < timeout {
			reported = false
			continue
		}
		if !reported {
			reported = true
			groups := MergeStacks(sample)
			select {
			case out <- stallReport{groups: groups, suspects: Suspects(groups), quiet: now.Sub(progress)}:
			case <-stop:
				return
			}
		}
	}
}

// importing says whether a thread is importing a module: loading torch's
// C library changes no frame for minutes from a cold network filesystem.
func importing(ts []Thread) bool {
	return slices.ContainsFunc(ts, func(t Thread) bool { return len(t) > 0 && strings.HasPrefix(t[0].File, "<frozen importlib") })
}

// onStall reports a stall on the console and in the log directory and
// acts as OnStall says.
func (s *supervisor) onStall(g *group, rep stallReport) {
	var b strings.Builder
	fmt.Fprintf(&b, "amdrun: the job stalled: no rank wrote output, touched %s or changed its stack for %s", EnvHeartbeat, rep.quiet.Round(100*time.Millisecond))
	if len(rep.suspects) > 0 {
		fmt.Fprintf(&b, "; suspects: %s", ranksNoun(rep.suspects))
	}
	b.WriteString("\n")
	_ = WriteStacks(&b, rep.groups)
	s.stacks.askFR()
	if fr := s.flightRecord(g.attempt); fr != "" {
		b.WriteString("amdrun: " + fr + "\n")
	}
	stops := s.o.OnStall == StallStop || s.o.OnStall == StallRestart
	if stops {
		fmt.Fprintf(&b, "amdrun: stopping the worker group (--on-stall %s)\n", s.o.OnStall)
	} else {
		b.WriteString("amdrun: the job keeps running (--on-stall report)\n")
	}
	s.note(b.String())
	s.stallFiles++
	s.keepFile(fmt.Sprintf("stall_attempt_%d_%d.txt", g.attempt, s.stallFiles), strings.NewReader(b.String()))
	if stops {
		s.stall = &rep
		g.stop(unix.SIGTERM, s.o.Grace)
	}
}

// stallLine is the failure summary's headline for a stalled attempt.
func (s *supervisor) stallLine(attempt int) string {
	l := fmt.Sprintf("amdrun: stalled (attempt %d of %d): no progress for %s", attempt+1, s.plan.MaxRestarts+1, s.stall.quiet.Round(100*time.Millisecond))
	if len(s.stall.suspects) > 0 {
		l += "; suspects: " + ranksNoun(s.stall.suspects)
	}
	return l
}

// serveStacks answers `amdrun stacks` on the control socket in the job's
// private directory until stop; a peer neither this user nor root is
// refused all the same.
func (s *supervisor) serveStacks() (stop func()) {
	path := filepath.Join(s.errs.Name(), ctlSocket)
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return func() {} // a path too long for a socket: no `amdrun stacks`
	}
	l.SetUnlinkOnClose(true)
	go func() {
		for {
			c, err := l.AcceptUnix()
			if err != nil {
				return
			}
			go s.answerStacks(c)
		}
	}()
	return func() { l.Close() }
}

func (s *supervisor) answerStacks(c *net.UnixConn) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if uid, ok := peerUID(c); !ok || (uid != os.Geteuid() && uid != 0) {
		fmt.Fprintf(c, "error only the job's owner or root can take its stacks\n")
		return
	}
	l, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || l != "stacks\n" && l != "stacks native\n" {
		return
	}
	var b strings.Builder
	sample, _ := s.stacks.take()
	_ = WriteStacks(&b, MergeStacks(sample))
	if l == "stacks native\n" {
		s.stacks.native(&b)
	}
	fmt.Fprintf(c, "ok\n%s", b.String())
}

func peerUID(c *net.UnixConn) (int, bool) {
	raw, err := c.SyscallConn()
	if err != nil {
		return 0, false
	}
	var cred *unix.Ucred
	_ = raw.Control(func(fd uintptr) {
		cred, err = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	})
	if err != nil || cred == nil {
		return 0, false
	}
	return int(cred.Uid), true
}
