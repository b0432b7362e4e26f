package topology

import (
	"fmt"
)

// P2P says whether two devices can copy peer to peer instead of staging
// the copy through host memory.
type P2P int8

// P2P states. The zero value, P2PUnknown, counts as able to copy directly.
const (
	P2PUnknown P2P = iota
	P2PAvailable
	P2PUnavailable
)

// MarshalJSON writes true, false, or null for unknown.
func (p P2P) MarshalJSON() ([]byte, error) {
	switch p {
	case P2PAvailable:
		return []byte("true"), nil
	case P2PUnavailable:
		return []byte("false"), nil
	}
	return []byte("null"), nil
}

// UnmarshalJSON reads true, false or null.
func (p *P2P) UnmarshalJSON(b []byte) error {
	switch string(b) {
	case "true":
		*p = P2PAvailable
	case "false":
		*p = P2PUnavailable
	case "null":
		*p = P2PUnknown
	default:
		return fmt.Errorf("p2p: %s is not true, false or null", b)
	}
	return nil
}

// HostStaged is the bandwidth of a copy without peer-to-peer access over a
// link of bandwidth link and a host path of host (<= 0: the default): the
// data crosses the slower twice, so half of it, ranking the pair below one
// that copies directly.
func HostStaged(link, host int64) int64 {
	if host <= 0 {
		host = DefaultHostBandwidth
	}
	bw := min(link, host)
	if bw <= 0 {
		bw = host
	}
	return max(bw/2, 1)
}
