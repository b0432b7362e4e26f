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
