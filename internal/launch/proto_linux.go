package launch

// The protocol between amdrun and the processes it re-executes to contain
// a job: each rank's guard (ShimMain --guard) and the job's keeper
// (KeeperMain). Every descriptor and every message of it is named here,
// and encoded and decoded here only (issue 21.3; runc's
// libcontainer/sync.go is the model).
//
//	amdrun (supervisor)                         guard of rank r
//	  ctl  (pipe, write end) ---- guardCtlFD ---->  control: one byte each
//	        ctlAck: the rank's pid is known, reap from now on
//	        ctlSignal(n): send signal n to the rank's process group
//	        EOF (amdrun died): kill the rank's tree, exit
//	  report (pipe, read end) <-- guardReportFD --  report: one line each
//	        msgPid{pid}: the rank runs as pid (in the guard's namespace)
//	        msgStatus{ws}: the rank ended with wait status ws, all it
//	                       left is gone; the guard exits next
//	        EOF without msgStatus: the guard died (see watch)
//	  held files ---------------- guardHoldFD.. ->  kept open to the end
//
//	amdrun (supervisor)                         keeper of the job
//	  lifeline (pipe, write end) - keeperLifeFD ->  lifeline: one byte each
//	        keeperSweep: kill every orphan (a process whose guard
//	                     died), it came to the keeper
//	        EOF (the job is over, or amdrun died): empty the namespace,
//	            remove the error directory, exit
//	  status (pipe, read end) <-- keeperStatusFD -  one line: "ok", or why
//	                                               the keeper could not
//	                                               set up
//	  requests (socket) <-------> keeperReqFD --->  ContainUserNamespace:
//	        startRequest{argv, env, dir} + the guard's descriptors
//	        (SCM_RIGHTS: stdin or none, stdout, stderr, control, report)
//	        -> startReply{pid} (the guard's pid in the namespace) or
//	           startReply{error}; the keeper forks the guard, which is
//	           then amdrun's to talk to over its own pipes
//	  held files ---------------- keeperHoldFD.. -> kept open until the
//	                                               namespace is empty
//
// Guards and keeper mark every descriptor from 3 on close-on-exec first
// (cloexecFrom), and the keeper receives a guard's with MSG_CMSG_CLOEXEC:
// no guard gets another's and no rank any (issue 36.1).

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

const (
	guardCtlFD    = 3
	guardReportFD = 4
	guardHoldFD   = 5
)

const (
	keeperLifeFD   = 3
	keeperStatusFD = 4
	keeperReqFD    = 5
	keeperHoldFD   = 6
)

const ctlAck byte = 0        // the rank's pid is known
const keeperSweep byte = 's' // kill the orphans

func ctlSignal(sig syscall.Signal) byte { return byte(sig) }

func ctlDecode(b byte) (ack bool, sig syscall.Signal) {
	if b == ctlAck {
		return true, 0
	}
	return false, syscall.Signal(b)
}

type reportKind int

const (
	msgPid reportKind = iota + 1
	msgStatus
)

type guardMsg struct {
	Kind   reportKind
	Pid    int                // msgPid
	Status syscall.WaitStatus // msgStatus
}

var errReport = errors.New("guard report")

const maxReportLine = 64 // a keyword and a number

func (m guardMsg) encode() []byte {
	if m.Kind == msgPid {
		return []byte("pid " + strconv.Itoa(m.Pid) + "\n")
	}
	return []byte("status " + strconv.FormatUint(uint64(uint32(m.Status)), 10) + "\n")
}

// decodeReport parses one report line; one not exactly as encode writes
// it is an error.
func decodeReport(line string) (guardMsg, error) {
	line = strings.TrimSuffix(line, "\n")
	if len(line) > maxReportLine {
		return guardMsg{}, fmt.Errorf("%w: line of %d bytes", errReport, len(line))
	}
	key, val, ok := strings.Cut(line, " ")
	if !ok {
		return guardMsg{}, fmt.Errorf("%w: %q", errReport, line)
	}
	switch key {
	case "pid":
		n, err := strconv.Atoi(val)
		if err != nil || n <= 0 || strconv.Itoa(n) != val {
			return guardMsg{}, fmt.Errorf("%w: bad pid %q", errReport, val)
		}
		return guardMsg{Kind: msgPid, Pid: n}, nil
	case "status":
		n, err := strconv.ParseUint(val, 10, 32)
		if err != nil || strconv.FormatUint(n, 10) != val {
			return guardMsg{}, fmt.Errorf("%w: bad status %q", errReport, val)
		}
		return guardMsg{Kind: msgStatus, Status: syscall.WaitStatus(uint32(n))}, nil
	}
	return guardMsg{}, fmt.Errorf("%w: unknown message %q", errReport, key)
}

// readReport reads the next message; io.EOF when the guard closed the pipe.
func readReport(r *bufio.Reader) (guardMsg, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		if line == "" || err != io.EOF {
			return guardMsg{}, err
		}
		return guardMsg{}, fmt.Errorf("%w: line cut short: %q", errReport, line)
	}
	return decodeReport(line)
}

const keeperOK = "ok"

func encodeKeeperStatus(err error) []byte {
	if err == nil {
		return []byte(keeperOK + "\n")
	}
	return []byte(strings.ReplaceAll(err.Error(), "\n", " ") + "\n")
}

// decodeKeeperStatus is nil for the keeper's "ok", else the reason it gave.
func decodeKeeperStatus(line string) error {
	switch line = strings.TrimSpace(line); line {
	case keeperOK:
		return nil
	case "":
		return errors.New("the keeper exited before it was ready")
	}
	return errors.New(line)
}

// startRequest asks the keeper of a user namespace to fork a guard:
// amdrun cannot (setns into one needs a single-threaded process).
type startRequest struct {
	Argv  []string `json:"argv"`
	Env   []string `json:"env"`
	Dir   string   `json:"dir"`
	Stdin bool     `json:"stdin"` // the first descriptor is its stdin (else /dev/null)
}

type startReply struct {
	Pid   int    `json:"pid,omitempty"`
	Error string `json:"error,omitempty"`
}

// maxStartMsg bounds a request; both sides read into a buffer this big.
const maxStartMsg = 1 << 20

// startFDs is how many descriptors come with a request (stdin first if any).
func (r startRequest) startFDs() int {
	if r.Stdin {
		return 5
	}
	return 4
}

func (r startRequest) encode() ([]byte, error) {
	b, err := json.Marshal(r)
	if err == nil && len(b) > maxStartMsg {
		err = fmt.Errorf("start request of %d bytes (at most %d)", len(b), maxStartMsg)
	}
	return b, err
}

// decodeStartRequest parses a request; no command or a NUL byte is an error.
func decodeStartRequest(b []byte) (startRequest, error) {
	var r startRequest
	if err := json.Unmarshal(b, &r); err != nil {
		return startRequest{}, fmt.Errorf("start request: %w", err)
	}
	if len(r.Argv) == 0 || r.Argv[0] == "" {
		return startRequest{}, errors.New("start request: no command")
	}
	if slices.ContainsFunc(slices.Concat(r.Argv, r.Env, []string{r.Dir}), func(s string) bool { return strings.IndexByte(s, 0) >= 0 }) {
		return startRequest{}, errors.New("start request: a NUL byte in an argument")
	}
	return r, nil
}

func (r startReply) encode() []byte {
	b, _ := json.Marshal(r)
	return b
}

func decodeStartReply(b []byte) (int, error) {
	var r startReply
	if err := json.Unmarshal(b, &r); err != nil {
		return 0, fmt.Errorf("keeper: bad reply: %w", err)
	}
	switch {
	case r.Error != "":
		return 0, errors.New(r.Error)
	case r.Pid <= 0:
		return 0, errors.New("keeper: reply without a pid")
	}
	return r.Pid, nil
}

// readBytes sends each byte read from r to the channel it returns
// (buffered n), closed at EOF or an error.
func readBytes(r io.Reader, n int) <-chan byte {
	out := make(chan byte, n)
	go func() {
		defer close(out)
		br := bufio.NewReader(r)
		for b, err := br.ReadByte(); err == nil; b, err = br.ReadByte() {
			out <- b
		}
	}()
	return out
}
