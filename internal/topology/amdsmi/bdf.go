package amdsmi

import (
	"fmt"
	"strconv"
	"strings"
)

// normBDF returns a PCI address in the canonical lower-case form
// "0000:0c:00.0". It accepts "dddd:bb:dd.f" and "bb:dd.f" in either case.
func normBDF(s string) (string, bool) {
	parts := strings.Split(s, ":")
	var dom, bus, devfn string
	switch len(parts) {
	case 3:
		dom, bus, devfn = parts[0], parts[1], parts[2]
	case 2:
		dom, bus, devfn = "0", parts[0], parts[1]
	default:
		return "", false
	}
	dev, fn, ok := strings.Cut(devfn, ".")
	if !ok {
		return "", false
	}
	var v [4]uint64
	for i, f := range []struct {
		S    string
		bits int
	}{{dom, 32}, {bus, 8}, {dev, 5}, {fn, 3}} {
		if f.S == "" || len(f.S) > 8 {
			return "", false
		}
		n, err := strconv.ParseUint(f.S, 16, f.bits)
		if err != nil {
			return "", false
		}
		v[i] = n
	}
	return fmt.Sprintf("%04x:%02x:%02x.%x", v[0], v[1], v[2], v[3]), true
}
