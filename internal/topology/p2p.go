package topology

import (
	"fmt"
)

// P2P says whether two devices can copy peer to peer: one device reading
// or writing the other's memory directly (over XGMI, NVLink or PCIe),
// instead of staging the copy through host memory.
type P2P int8

// P2P states. The zero value is P2PUnknown: the source did not say, and
// amdrun counts the pair as able to copy directly.
const (
	P2PUnknown P2P = iota
	P2PAvailable
	P2PUnavailable
)

// MarshalJSON writes true or false, and null for unknown (which
// `json:",omitempty"` leaves out).
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

// HostStaged is the bandwidth amdrun counts for a copy between two
// devices without peer-to-peer access, whose theoretical link bandwidth
// is link and host path bandwidth is host (<= 0: DefaultHostBandwidth):
// the data crosses the host twice (device to host memory, then host
// memory to device) on the slower of the two, so half of it. It ranks
// such a pair below a pair that can copy directly over the same path.
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
