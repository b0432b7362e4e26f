package amdsmi

import (
	"strings"

	"github.com/amdrun/amdrun/internal/topology"
)

// normBDF returns a PCI address in the canonical lower-case form
// "0000:0c:00.0". It accepts "dddd:bb:dd.f" and "bb:dd.f" in either case.
func normBDF(s string) (string, bool) {
	if strings.Count(s, ":") == 1 {
		s = "0:" + s
	}
	return topology.NormalizePCI(s)
}
