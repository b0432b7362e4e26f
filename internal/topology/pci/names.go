package pci

import (
	"fmt"
	"os"

	"github.com/amdrun/amdrun/internal/topology"
	"github.com/jaypipes/pcidb"
)

// Names looks up product names in the PCI ID database as ghw's pcidb
// finds it, never over the network. A nil *Names gives the numeric ids.
type Names struct {
	db *pcidb.PCIDB
}

// LoadNames reads the host's PCI ID database; nil when there is none.
func LoadNames() *Names {
	db, err := pcidb.New(noNetwork)
	if err != nil {
		return nil
	}
	return &Names{db: db}
}

// noNetwork keeps pcidb off the network even where PCIDB_ENABLE_NETWORK_FETCH
// allows it: discovery never downloads.
var noNetwork = &pcidb.WithOption{EnableNetworkFetch: new(bool)}

// Product is the database's name of the product ("GH100 [H200 SXM
// 141GB]"), else the numeric ids "10de:2335".
func (n *Names) Product(vendor, device uint16) string {
	id := fmt.Sprintf("%04x%04x", vendor, device)
	if n != nil && n.db != nil {
		if p := n.db.Products[id]; p != nil && p.Name != "" {
			return p.Name
		}
	}
	return id[:4] + ":" + id[4:]
}

// FillNames names every device of m that has none but a PCI address by
// Product of its sysfs vendor and device ids under root, loading names
// when nil; a device whose ids do not read keeps no name.
func FillNames(m *topology.Model, root string, names *Names) {
	fsys := os.DirFS(root)
	loaded := names != nil
	for i := range m.Devices {
		d := &m.Devices[i]
		if d.Name != "" || !validAddress(d.PCIAddress) {
			continue
		}
		p := devicesDir + "/" + d.PCIAddress
		vendor, err1 := readHex(fsys, p+"/vendor")
		device, err2 := readHex(fsys, p+"/device")
		if err1 != nil || err2 != nil {
			continue
		}
		if !loaded {
			names, loaded = LoadNames(), true
		}
		d.Name = names.Product(uint16(vendor), uint16(device))
	}
}
