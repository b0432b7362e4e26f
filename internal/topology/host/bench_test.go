//go:build linux

package host

import (
	"testing"

	"github.com/amdrun/amdrun/internal/testutil"
)

func BenchmarkNUMANodes(b *testing.B) {
	for _, tt := range []struct{ name, root string }{
		{"two-node", testutil.Testdata(b, "host", "two-node")},
		{"live", "/"},
	} {
		b.Run(tt.name, func(b *testing.B) {
			for b.Loop() {
				if n, err := NUMANodes(tt.root); err != nil || len(n) == 0 {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCPUGroups is what --bind socket and core-complex add to a
// launch (a few small sysfs files per CPU), beside BenchmarkNUMANodes.
func BenchmarkCPUGroups(b *testing.B) {
	for _, tt := range []struct{ name, root string }{
		{"epyc-2p", testutil.Testdata(b, "host", "epyc-2p")},
		{"live", "/"},
	} {
		nodes, err := NUMANodes(tt.root)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(tt.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := CPUGroups(tt.root, nodes); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
