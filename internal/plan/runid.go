package plan

import (
	"crypto/rand"
	"encoding/hex"
	"net"
)

// NewRunID returns a fresh TORCHELASTIC_RUN_ID, "amdrun-" and 12 hex digits.
func NewRunID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "amdrun-" + hex.EncodeToString(b[:])
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago:
// the kernel picks it for a listener that is then closed. Another process
// may take it before the workers bind it; the window is short.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
