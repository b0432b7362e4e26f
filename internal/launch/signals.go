package launch

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// DefaultSignals are Run's forwarded signals when Forward is nil: torchrun's
// default --signals-to-handle, and SIGUSR1, SIGUSR2 (Slurm's preemption).
var DefaultSignals = signalsNamed(ForwardedSignals)

var stopSignals = signalsNamed(StopSignals)

// signalsNamed are names' signals; an unknown name panics at start.
func signalsNamed(names []string) []os.Signal {
	out := make([]os.Signal, len(names))
	for i, n := range names {
		sig := unix.SignalNum(n)
		if sig == 0 {
			panic("launch: unknown signal " + n)
		}
		out[i] = sig
	}
	return out
}

// unforwardable are signals that cannot be caught, or that the Go runtime
// or amdrun needs.
var unforwardable = []syscall.Signal{unix.SIGKILL, unix.SIGSTOP, unix.SIGCHLD, unix.SIGURG, unix.SIGPIPE,
	unix.SIGSEGV, unix.SIGBUS, unix.SIGFPE, unix.SIGILL, unix.SIGTRAP, unix.SIGABRT, unix.SIGPROF}

// ParseSignals reads --signals-to-handle: comma-separated signal names,
// with or without "SIG", any case. A name that is not a signal, one amdrun
// cannot forward and an empty list are errors.
func ParseSignals(list string) ([]os.Signal, error) {
	var out []os.Signal
	for _, name := range strings.Split(list, ",") {
		name = strings.ToUpper(strings.TrimSpace(name))
		if name == "" {
			continue
		}
		if !strings.HasPrefix(name, "SIG") {
			name = "SIG" + name
		}
		sig := unix.SignalNum(name)
		if sig == 0 {
			return nil, fmt.Errorf("%s is not a signal", name)
		}
		if slices.Contains(unforwardable, sig) {
			return nil, fmt.Errorf("%s cannot be forwarded (it cannot be caught, or amdrun itself needs it)", name)
		}
		if !slices.Contains(out, os.Signal(sig)) {
			out = append(out, sig)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("empty list of signals")
	}
	return out, nil
}

// PrefixFromTemplate expands TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE for one
// rank as Python's string.Template.safe_substitute: $role_name, $rank and
// $local_rank (also ${name}) are replaced, $$ is a dollar, all else kept.
func PrefixFromTemplate(tmpl, role string, rank, localRank int) string {
	vars := map[string]string{"role_name": role, "rank": fmt.Sprint(rank), "local_rank": fmt.Sprint(localRank)}
	var b strings.Builder
	for i := 0; i < len(tmpl); i++ {
		c := tmpl[i]
		if c != '$' || i+1 == len(tmpl) {
			b.WriteByte(c)
			continue
		}
		rest := tmpl[i+1:]
		switch {
		case rest[0] == '$':
			b.WriteByte('$')
			i++
			continue
		case rest[0] == '{':
			if end := strings.IndexByte(rest, '}'); end > 0 {
				if v, ok := vars[rest[1:end]]; ok {
					b.WriteString(v)
					i += end + 1
					continue
				}
			}
		default:
			n := 0
			for n < len(rest) && isIdentByte(rest[n], n) {
				n++
			}
			if v, ok := vars[rest[:n]]; ok && n > 0 {
				b.WriteString(v)
				i += n
				continue
			}
		}
		b.WriteByte(c)
	}
	return b.String()
}

// isIdentByte says whether c may be byte i of an ASCII Python identifier.
func isIdentByte(c byte, i int) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (i > 0 && c >= '0' && c <= '9')
}

// forward is o.Forward, or DefaultSignals when it is nil.
func (o *RunOptions) forward() []os.Signal {
	if o.Forward == nil {
		return DefaultSignals
	}
	return o.Forward
}
