package topology

import "slices"

// Locality ranks how close two devices sit, closest highest; selection
// compares it after bandwidth. PCIe ranks as in NCCL (PIX > PXB > PHB >
// NODE > SYS), below any fabric link.
type Locality int

// Localities, farthest first.
const (
	LocalitySYS     Locality = iota // PCIe across the SMP interconnect between NUMA nodes
	LocalityNODE                    // PCIe across host bridges within one NUMA node
	LocalityPHB                     // PCIe through one host bridge, or of unknown level
	LocalityPXB                     // PCIe through several switches, no host bridge
	LocalityPIX                     // PCIe through at most one switch
	LocalityFabric                  // an XGMI or NVLink link, hive unknown
	LocalityHive                    // an XGMI or NVLink link inside one hive (equal Hive)
	LocalityPackage                 // two dies or partitions of one package
)

// Locality returns how close devices a and b are (LocalitySYS for a == b
// or unknown indices).
func (m *Model) Locality(a, b int) Locality {
	l := m.Link(a, b)
	if l == nil {
		return LocalitySYS
	}
	da, db := &m.Devices[l.A], &m.Devices[l.B]
	return l.Locality(da.Package != "" && da.Package == db.Package, da.Hive != "" && da.Hive == db.Hive)
}

// Locality is the locality of link l between devices that do or do not
// share a known Package and a known Hive.
func (l *Link) Locality(samePackage, sameHive bool) Locality {
	switch {
	case samePackage:
		return LocalityPackage
	case l.Type != LinkPCIe && sameHive:
		return LocalityHive
	case l.Type != LinkPCIe:
		return LocalityFabric
	}
	switch l.Level {
	case LevelPIX:
		return LocalityPIX
	case LevelPXB:
		return LocalityPXB
	case LevelNODE:
		return LocalityNODE
	case LevelSYS:
		return LocalitySYS
	}
	return LocalityPHB
}

// applyNUMARule makes a PCIe path between devices on different NUMA nodes
// SYS when its source gave no finer level, and gives an assumed bandwidth
// the SYS assumption, so that every source tells one story (issue #16).
func (m *Model) applyNUMARule(l *Link) {
	na, nb := m.Devices[l.A].NUMANode, m.Devices[l.B].NUMANode
	if l.Type != LinkPCIe || na < 0 || nb < 0 || na == nb || slices.Contains([]string{LevelPIX, LevelPXB, LevelNODE, LevelSYS}, l.Level) {
		return
	}
	l.Level = LevelSYS
	l.Hops = max(l.Hops, 3)
	if l.Assumed {
		l.MaxBandwidth = AssumedBandwidth(l.Type, l.Level, l.Count, m.HostBandwidth)
		l.MinBandwidth = l.MaxBandwidth
	}
}
