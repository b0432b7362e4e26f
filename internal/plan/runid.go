package plan

import (
	"crypto/rand"
	"encoding/hex"
)

// NewRunID returns a fresh TORCHELASTIC_RUN_ID, "amdrun-" and 12 hex digits.
func NewRunID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "amdrun-" + hex.EncodeToString(b[:])
}
