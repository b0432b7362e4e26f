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

// freePort is a TCP port of 127.0.0.1 the kernel gave a listener it then
// closed: another process may take it before rank 0 binds it.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
