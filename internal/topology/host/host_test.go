package host

import (
	"errors"
	"io/fs"
	"reflect"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/amdrun/amdrun/internal/topology"
)

func TestDeviceNUMA(t *testing.T) {
	f := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	// PCI addresses contain ':', which module zips do not allow in file
	// names, so these trees live in memory.
	fsys := fstest.MapFS{
		"sys/bus/pci/devices/0000:63:00.0/numa_node":     f("1\n"),
		"sys/bus/pci/devices/0000:63:00.0/local_cpulist": f("48-95,144-191\n"),
		"sys/bus/pci/devices/0000:03:00.0/numa_node":     f("-1\n"),
		"sys/bus/pci/devices/0000:03:00.0/local_cpulist": f("0-7\n"),
		"sys/bus/pci/devices/0000:04:00.0/numa_node":     f("0\n"),
		"sys/bus/pci/devices/0000:05:00.0/numa_node":     f("zero\n"),
		"sys/bus/pci/devices/0000:06:00.0/numa_node":     f("0\n"),
		"sys/bus/pci/devices/0000:06:00.0/local_cpulist": f("3-1\n"),
	}
	span := func(a, b int) []int {
		var out []int
		for i := a; i <= b; i++ {
			out = append(out, i)
		}
		return out
	}
	tests := []struct {
		addr     string
		node     int
		cpus     []int
		errMsg   string
		sentinel error
	}{
		{addr: "0000:63:00.0", node: 1, cpus: append(span(48, 95), span(144, 191)...)},
		{addr: "0000:63:00.0 ", node: 1, cpus: append(span(48, 95), span(144, 191)...)},
		{addr: "0000:03:00.0", node: -1, cpus: span(0, 7)},
		{addr: "0000:04:00.0", node: 0, cpus: nil},
		{addr: "0000:9a:00.0", node: -1, errMsg: "host: PCI device 0000:9a:00.0: open sys/bus/pci/devices/0000:9a:00.0/numa_node", sentinel: fs.ErrNotExist},
		{addr: "0000:05:00.0", node: -1, errMsg: `host sys/bus/pci/devices/0000:05:00.0/numa_node: line 1: not a number: numa_node "zero"`, sentinel: topology.ErrBadNumber},
		{addr: "0000:06:00.0", node: -1, errMsg: "host sys/bus/pci/devices/0000:06:00.0/local_cpulist: line 1: malformed input", sentinel: topology.ErrSyntax},
		{addr: "../../x", node: -1, errMsg: `host: bad PCI address "../../x"`},
		{addr: "", node: -1, errMsg: `host: bad PCI address ""`},
	}
	for _, tt := range tests {
		node, cpus, err := DeviceNUMA(fsys, tt.addr)
		if tt.errMsg != "" {
			if err == nil || !strings.HasPrefix(err.Error(), tt.errMsg) {
				t.Errorf("%q: error %v, want %q", tt.addr, err, tt.errMsg)
			}
			if tt.sentinel != nil && !errors.Is(err, tt.sentinel) {
				t.Errorf("%q: error %v does not wrap %v", tt.addr, err, tt.sentinel)
			}
			continue
		}
		if err != nil || node != tt.node || !reflect.DeepEqual(cpus, tt.cpus) {
			t.Errorf("%q: got %d %v %v, want %d %v", tt.addr, node, cpus, err, tt.node, tt.cpus)
		}
	}
}
