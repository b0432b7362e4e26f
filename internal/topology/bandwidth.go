package topology

// Bandwidth assumptions, in MB/s, used where a source names a link but not
// its speed. They rank links; they are not promises. Measured figures
// (rocm_bandwidth_test, amdrun bench) replace them.
const (
	// PCIeGen4x16 is PCIe Gen4 x16 per direction (Gen3 is half, Gen5 double).
	PCIeGen4x16 int64 = 32000

	// DefaultHostBandwidth is assumed for a pair with no direct link (they
	// talk through the host): PCIe Gen4 x16, below any XGMI or NVLink link.
	DefaultHostBandwidth = PCIeGen4x16

	// XGMILinkBandwidth is one Infinity Fabric (XGMI) link as rocm-smi
	// reports its minimum (MI210/MI250: 50000-x MB/s).
	XGMILinkBandwidth int64 = 50000
	// NVLinkBandwidth is one NVLink (3rd/4th generation: 25 GB/s per
	// direction; nvidia-smi nvlink -s gives the real figure).
	NVLinkBandwidth int64 = 25000
)

// AssumedBandwidth returns the bandwidth amdrun assumes for a link of the
// given type, PCIe level and link count, with host the bandwidth of a path
// through the host. Counts below 1 count as one link.
func AssumedBandwidth(t LinkType, level string, count int, host int64) int64 {
	if host <= 0 {
		host = DefaultHostBandwidth
	}
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

// Hops per PCIe level. No PCIe source gives a hop count; these order the
// paths from closest to farthest: a single PCIe switch (PIX) is one hop,
// several switches (PXB) or the host bridge (PHB) two, crossing host
// bridges within a NUMA node (NODE) three, crossing the SMP interconnect
// (SYS) four.
const (
	HopsPIX  = 1
	HopsPXB  = 2
	HopsPHB  = 2
	HopsNODE = 3
	HopsSYS  = 4
)

// PCIeLink is the link between devices a and b whose path is PCIe at
// level, in nvidia-smi topo -m's words: PIX and PXB are peer to peer
// through switches, Direct; PHB and NODE go through the host, not Direct;
// anything else (SYS, "SOC", its pre-2017 name) is LevelSYS. The
// bandwidth is left to Finish's assumption by level.
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
