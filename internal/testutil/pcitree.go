package testutil

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// PCITree builds a sysfs PCI tree under a new temporary root from
// testdata/pci/NAME.tree (one function a line: "path vendor:device class
// numa_node"), the bridges on each path made PCI-to-PCI bridges.
func PCITree(t testing.TB, name string) string {
	t.Helper()
	root := t.TempDir()
	for line := range strings.Lines(string(ReadFile(t, Testdata(t, "pci", name+".tree")))) {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 4 {
			t.Fatalf("%s.tree: %q: want 4 fields", name, line)
		}
		vendor, device, _ := strings.Cut(f[1], ":")
		parts := strings.Split(f[0], "/")
		for i := 1; i < len(parts)-1; i++ {
			PCIFunction(t, root, strings.Join(parts[:i+1], "/"), "1022", "1483", "0x060400", "-1")
		}
		PCIFunction(t, root, f[0], vendor, device, f[2], f[3])
	}
	return root
}

// PCIFunction adds one function to a sysfs PCI tree under root, as the
// kernel lays it out, unless it is there.
func PCIFunction(t testing.TB, root, path, vendor, device, class, numa string) {
	t.Helper()
	addr := path[strings.LastIndex(path, "/")+1:]
	link := filepath.Join(root, "sys/bus/pci/devices", addr)
	if _, err := os.Lstat(link); err == nil {
		return
	}
	dir := filepath.Join(root, "sys/devices", path)
	files := map[string]string{"vendor": "0x" + vendor, "device": "0x" + device, "class": class, "numa_node": numa}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for n, v := range files {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../../devices/"+path, link); err != nil {
		t.Fatal(err)
	}
}
