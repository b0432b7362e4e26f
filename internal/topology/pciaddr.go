package topology

import (
	"fmt"
	"strconv"
	"strings"
)

// NormalizePCI turns a PCI address as tools print it ("00000000:18:00.0",
// "0000:0C:00.0", rocm_bandwidth_test's "18:00.0") into the model's form,
// "0000:18:00.0"; false when s is not [domain:]bus:device.function.
func NormalizePCI(s string) (string, bool) {
	s = strings.ToLower(strings.TrimSpace(s))
	if strings.Count(s, ":") == 1 {
		s = "0:" + s
	}
	dom, rest, ok := strings.Cut(s, ":")
	if !ok {
		return "", false
	}
	bus, rest, ok := strings.Cut(rest, ":")
	if !ok {
		return "", false
	}
	dev, fn, ok := strings.Cut(rest, ".")
	if !ok {
		return "", false
	}
	d, err1 := strconv.ParseUint(dom, 16, 32)
	b, err2 := strconv.ParseUint(bus, 16, 8)
	v, err3 := strconv.ParseUint(dev, 16, 8)
	f, err4 := strconv.ParseUint(fn, 16, 8)
	if err1 != nil || err2 != nil || err3 != nil || err4 != nil || len(dom) > 8 || len(bus) > 2 || len(dev) > 2 || len(fn) > 1 || v > 0x1f || f > 7 {
		return "", false
	}
	return fmt.Sprintf("%04x:%02x:%02x.%x", d, b, v, f), true
}
