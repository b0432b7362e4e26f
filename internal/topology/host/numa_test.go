package host

import (
	"errors"
	"io/fs"
	"os"
	"reflect"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/amdrun/amdrun/internal/testutil"
	"github.com/amdrun/amdrun/internal/topology"
)

var twoNode = []topology.NUMANode{{ID: 0, CPUs: []int{0, 1, 4, 5}}, {ID: 1, CPUs: []int{2, 3, 6}}}

func TestReadNUMA(t *testing.T) {
	got, err := ReadNUMA(os.DirFS(testutil.Testdata(t, "host", "two-node")))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, twoNode) {
		t.Errorf("got %+v, want %+v", got, twoNode)
	}
}

func TestReadNUMACases(t *testing.T) {
	f := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	const d = NodeDir + "/"
	tests := []struct {
		name     string
		fsys     fstest.MapFS
		want     []topology.NUMANode
		errMsg   string
		sentinel error
	}{
		{name: "memory-only node and numeric order",
			fsys: fstest.MapFS{d + "node10/cpulist": f("8-9\n"), d + "node2/cpulist": f("\n"), d + "node0/cpulist": f("0-7\n"),
				d + "online": f("0,2,10\n"), d + "possible": f("0-15\n"), d + "node01/cpulist": f("99\n")},
			want: []topology.NUMANode{{ID: 0, CPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}}, {ID: 2, CPUs: []int{}}, {ID: 10, CPUs: []int{8, 9}}}},
		// Only cpulist is read: no meminfo, hugepages or distance (ghw
		// needed all three and returned no node without them).
		{name: "cpulist only", fsys: fstest.MapFS{d + "node0/cpulist": f("0-3")},
			want: []topology.NUMANode{{ID: 0, CPUs: []int{0, 1, 2, 3}}}},
		{name: "no node directory", fsys: fstest.MapFS{"proc/meminfo": f("")},
			errMsg: "host: open sys/devices/system/node: file does not exist", sentinel: fs.ErrNotExist},
		{name: "no node", fsys: fstest.MapFS{d + "power/async": f("disabled")},
			errMsg: "host: sys/devices/system/node: no NUMA nodes"},
		{name: "bad cpulist", fsys: fstest.MapFS{d + "node0/cpulist": f("0-3\n"), d + "node1/cpulist": f("2-x\n")},
			errMsg: "host sys/devices/system/node/node1/cpulist: line 1: malformed input", sentinel: topology.ErrSyntax},
		{name: "node without cpulist", fsys: fstest.MapFS{d + "node0/meminfo": f("")},
			errMsg: "host: open sys/devices/system/node/node0/cpulist: file does not exist", sentinel: fs.ErrNotExist},
	}
	for _, tt := range tests {
		got, err := ReadNUMA(tt.fsys)
		if tt.errMsg != "" {
			if err == nil || !strings.HasPrefix(err.Error(), tt.errMsg) || (tt.sentinel != nil && !errors.Is(err, tt.sentinel)) {
				t.Errorf("%s: error %v, want %q (wrapping %v)", tt.name, err, tt.errMsg, tt.sentinel)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: got %+v %v, want %+v", tt.name, got, err, tt.want)
		}
	}
}
