package topology

// Locality ranks how close two devices sit, closest highest. Selection
// compares it after bandwidth, so that of two sets with equal bandwidth
// the one whose devices share a PCIe switch, a package or a hive wins.
// The PCIe order is NCCL's (PIX > PXB > PHB > NODE > SYS); any fabric
// link (XGMI, NVLink) ranks above any PCIe path.
type Locality int

// Localities, farthest first.
const (
	// LocalitySYS: PCIe across the SMP interconnect between NUMA nodes.
	LocalitySYS Locality = iota
	// LocalityNODE: PCIe across host bridges within one NUMA node.
	LocalityNODE
	// LocalityPHB: PCIe through one host bridge; also a PCIe path whose
	// level the source does not give (AMD tools print only "PCIE").
	LocalityPHB
	// LocalityPXB: PCIe through several switches, no host bridge.
	LocalityPXB
	// LocalityPIX: PCIe through at most one switch.
	LocalityPIX
	// LocalityFabric: an XGMI or NVLink link, hive unknown.
	LocalityFabric
	// LocalityHive: an XGMI or NVLink link inside one hive (equal Hive).
	LocalityHive
	// LocalityPackage: two dies or partitions of one package (equal
	// Package): an MI250's two GCDs, an MI300X's CPX partitions.
	LocalityPackage
)

// Locality returns how close devices a and b of a finished model are;
// LocalitySYS for a == b or unknown indices.
func (m *Model) Locality(a, b int) Locality {
	l := m.Link(a, b)
	if l == nil {
		return LocalitySYS
	}
	return m.LinkLocality(l)
}

// LinkLocality is Locality(l.A, l.B) for one of m's links, without
// looking the pair up (the selector weighs every pair of a node from its
// links).
func (m *Model) LinkLocality(l *Link) Locality {
	da, db := &m.Devices[l.A], &m.Devices[l.B]
	return l.Locality(da.Package != "" && da.Package == db.Package, da.Hive != "" && da.Hive == db.Hive)
}

// Locality is the locality of link l between two devices that do or do
// not share a package (the same known Device.Package) and a hive (the
// same known Device.Hive): Model.Locality for a caller that compares
// those once a device rather than once a pair.
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
// SYS when its source gave no finer level (PHB, "PCIE" or none): such a
// path crosses the SMP interconnect whatever the tool printed. Every
// source thus tells the same story for the same machine (issue #16: one
// source said PHB 32 GB/s where the others said SYS 16 GB/s). A link
// whose bandwidth is an assumption gets the SYS assumption.
func (m *Model) applyNUMARule(l *Link) {
	na, nb := m.Devices[l.A].NUMANode, m.Devices[l.B].NUMANode
	if l.Type != LinkPCIe || na < 0 || nb < 0 || na == nb {
		return
	}
	switch l.Level {
	case LevelPIX, LevelPXB, LevelNODE, LevelSYS:
		return
	}
	l.Level = LevelSYS
	l.Hops = max(l.Hops, 3)
	if l.Assumed {
		l.MaxBandwidth = AssumedBandwidth(l.Type, l.Level, l.Count, m.HostBandwidth)
		l.MinBandwidth = l.MaxBandwidth
	}
}
