package topology

import (
	"cmp"
	"fmt"
)

// Bandwidth assumptions in MB/s for a link whose speed the source does not
// give; they rank links, and measured figures replace them.
const (
	PCIeGen4x16          int64 = 32000       // PCIe Gen4 x16 per direction (Gen3 is half, Gen5 double)
	DefaultHostBandwidth       = PCIeGen4x16 // assumed for a pair that talks through the host
	XGMILinkBandwidth    int64 = 50000       // one XGMI link as rocm-smi reports its minimum
	NVLinkBandwidth      int64 = 25000       // one NVLink (3rd/4th generation, per direction)
)

// AssumedBandwidth returns the bandwidth assumed for a link of type t,
// PCIe level and link count (at least 1), host being a host path's.
func AssumedBandwidth(t LinkType, level string, count int, host int64) int64 {
	host = cmp.Or(max(host, 0), DefaultHostBandwidth)
	count = max(count, 1)
	switch t {
	case LinkXGMI:
		return int64(count) * XGMILinkBandwidth
	case LinkNVLink:
		return int64(count) * NVLinkBandwidth
	}
	switch level {
	case LevelPIX, LevelPXB:
		return host // peer to peer through switches: full link speed
	case LevelNODE:
		return host * 3 / 4
	case LevelSYS:
		return host / 2
	}
	return host
}

// Hops per PCIe level. No PCIe source gives a hop count; these only order
// the paths from closest to farthest.
const (
	HopsPIX  = 1
	HopsPXB  = 2
	HopsPHB  = 2
	HopsNODE = 3
	HopsSYS  = 4
)

// PCIeLink is the PCIe link between devices a and b at nvidia-smi topo -m's
// level: PIX and PXB are Direct (through switches), PHB and NODE are not,
// anything else ("SOC", its pre-2017 name) is LevelSYS.
func PCIeLink(a, b int, level string) Link {
	l := Link{A: a, B: b, Type: LinkPCIe, Level: level}
	switch level {
	case LevelPIX:
		l.Hops, l.Direct = HopsPIX, true
	case LevelPXB:
		l.Hops, l.Direct = HopsPXB, true
	case LevelPHB:
		l.Hops = HopsPHB
	case LevelNODE:
		l.Hops = HopsNODE
	default:
		l.Level, l.Hops = LevelSYS, HopsSYS
	}
	return l
}

// P2P says whether two devices can copy peer to peer, not via host memory.
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
	host = cmp.Or(max(host, 0), DefaultHostBandwidth)
	bw := cmp.Or(max(min(link, host), 0), host) // link <= 0: unknown
	return max(bw/2, 1)
}
