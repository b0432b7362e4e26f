package topology

import "fmt"

// One rule for the link type of an AMD GPU pair whose two readings (row i
// column j, row j column i) disagree, shared by the rocm-smi and amd-smi
// readers (issue 24): the symmetric weight and hops decide, never the row
// order. docs/sources.md "When the two readings of a link disagree" gives
// the figures and their sources.

// Link type names as rocm-smi and amd-smi print them.
const (
	TypeXGMI = "XGMI"
	TypePCIE = "PCIE"
)

// Weight bounds: the lightest PCIe GPU path is 20 + 20 through one CPU;
// across sockets 52 or more (rocm_smi_lib#108). XGMI is 15 per hop (41
// between CPX MI300X GPUs), so weight alone decides only outside 40-51.
const (
	pcieMinWeight      = 40 // no PCIe GPU-GPU path is lighter
	xgmiMaxWeightAlone = 39 // with hops unknown, at most this is XGMI
	pcieMinWeightAlone = 52 // with hops unknown, at least this is PCIe
)

// InferLinkType says what a pair's weight and hops alone make of its
// link: TypeXGMI, TypePCIE, or "" when they do not decide. Values <= 0
// are unknown (amd-smi on MI355X prints weight 0 for every pair).
func InferLinkType(weight, hops int) string {
	w := weight > 0
	switch {
	case hops == 1 && (!w || weight < pcieMinWeightAlone):
		return TypeXGMI
	case hops >= 2 && (!w || weight >= pcieMinWeight):
		return TypePCIE
	case hops > 0 || !w:
		return ""
	case weight <= xgmiMaxWeightAlone:
		return TypeXGMI
	case weight >= pcieMinWeightAlone:
		return TypePCIE
	}
	return ""
}

// ResolveLinkType decides a pair's link type from its readings ab and ba
// (TypeXGMI, TypePCIE or "": not reported) and its weight and hops.
// Disagreeing readings are decided by InferLinkType, else TypePCIE, with a
// note for a warning; the answer never depends on which reading is ab.
func ResolveLinkType(ab, ba string, weight, hops int) (typ, note string) {
	switch {
	case ab == ba || ba == "":
		return ab, ""
	case ab == "":
		return ba, ""
	}
	// A fixed order, so the note does not depend on the rows' either.
	x, y := min(ab, ba), max(ab, ba)
	evidence, say, dont := weightHops(weight, hops)
	if t := InferLinkType(weight, hops); t != "" {
		return t, fmt.Sprintf("link type %s one way and %s the other; %s %s %s", x, y, evidence, say, t)
	}
	if evidence == "" {
		return TypePCIE, fmt.Sprintf("link type %s one way and %s the other, and no weight or hops; assuming %s", x, y, TypePCIE)
	}
	return TypePCIE, fmt.Sprintf("link type %s one way and %s the other; %s %s not decide; assuming %s", x, y, evidence, dont, TypePCIE)
}

// weightHops describes the known ones of weight and hops, with the verbs
// that agree with it.
func weightHops(weight, hops int) (evidence, say, dont string) {
	switch {
	case weight > 0 && hops > 0:
		return fmt.Sprintf("weight %d and hops %d", weight, hops), "say", "do"
	case weight > 0:
		return fmt.Sprintf("weight %d", weight), "says", "does"
	case hops > 0:
		return fmt.Sprintf("hops %d", hops), "say", "do"
	}
	return "", "", ""
}

// MatrixFault is the first cell of a device x device count matrix (Weight,
// Hops) that is not 0 on the diagonal or not symmetric.
type MatrixFault struct {
	// Row and Col locate the cell, 0-based; Row == Col on the diagonal,
	// else Row > Col.
	Row, Col int
	// Value is the cell's count; Mirror the count at (Col, Row).
	Value, Mirror int64
}

// Describe names the fault in one line, label naming a row or column and
// what the matrix: "GPU1-GPU0 weight is 15 but GPU0-GPU1 is 72; a row or
// column is out of place".
func (f *MatrixFault) Describe(label func(int) string, what string) string {
	if f.Row == f.Col {
		return fmt.Sprintf("%s's %s to itself is %d, not 0; a row or column is out of place", label(f.Row), what, f.Value)
	}
	return fmt.Sprintf("%s-%s %s is %d but %s-%s is %d; a row or column is out of place",
		label(f.Row), label(f.Col), what, f.Value, label(f.Col), label(f.Row), f.Mirror)
}

// CheckCountMatrix returns the first fault, in row order, of an n x n
// count matrix whose cell returns (r, c), ok false for N/A; nil if none.
// A row or column out of place would otherwise turn a pair into another
// link silently.
func CheckCountMatrix(n int, cell func(r, c int) (v int64, ok bool)) *MatrixFault {
	for r := 0; r < n; r++ {
		if d, ok := cell(r, r); ok && d != 0 {
			return &MatrixFault{Row: r, Col: r, Value: d, Mirror: d}
		}
		for c := 0; c < r; c++ {
			lo, okLo := cell(r, c)
			up, okUp := cell(c, r)
			if okLo && okUp && lo != up {
				return &MatrixFault{Row: r, Col: c, Value: lo, Mirror: up}
			}
		}
	}
	return nil
}
