package topology

import "fmt"

// One rule for the link type of an AMD GPU pair when the evidence
// disagrees, shared by the rocm-smi and amd-smi readers (issue 24).
//
// Both tools print a pair twice, row i column j and row j column i, and
// on some nodes the two cells of the LINK TYPE table disagree (a 4 x MI100
// node printed XGMI one way and PCIE the other for a pair whose weight is
// 72 and hops 3). Taking the first reading made the answer depend on the
// order of the rows. The weight and hops tables are checked to be
// symmetric, so they give one value per pair, and they tell the two
// kinds of path apart: amd-smi's weight is 15 per XGMI hop (13 between
// partitions of one MI300X) and 20 per PCIe segment, summed over the
// route, and its hops are 1 for GPUs on one XGMI fabric, 2 through one
// CPU socket and 3 across sockets (ROCm's MI200 guide; amdsmi
// docs/how-to/amdsmi-cli-tool.md, "Explain hops and weights").

// Link type names as rocm-smi and amd-smi print them.
const (
	TypeXGMI = "XGMI"
	TypePCIE = "PCIE"
)

// Weight bounds. The lightest PCIe path between two GPUs is two
// segments through one CPU (20 + 20 = 40); across sockets the CPU-CPU
// segment adds 10 or more (52 on the MI100 node of rocm_smi_lib#108). An
// XGMI fabric weighs 15 per physical hop (30, 45 for GPUs two or three
// apart; 41 between MI300X GPUs in CPX mode), so weight alone decides
// only outside 40-51.
const (
	pcieMinWeight      = 40 // no PCIe GPU-GPU path is lighter
	xgmiMaxWeightAlone = 39 // with hops unknown, at most this is XGMI
	pcieMinWeightAlone = 52 // with hops unknown, at least this is PCIe
)

// InferLinkType says what a pair's weight and hops alone make of its
// link: TypeXGMI, TypePCIE, or "" when they do not decide (both
// unknown, or contradicting each other). weight and hops at or below 0
// are unknown (amd-smi on MI355X prints weight 0 for every pair).
//
//   - hops 1 is one XGMI fabric, unless the weight is that of a PCIe
//     route across sockets (52 or more);
//   - hops 2 or more is a route through the host, unless the weight is
//     below any PCIe path's (40);
//   - with only the weight, up to 39 is XGMI and 52 or more PCIe.
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

// ResolveLinkType decides a pair's link type from its two readings ab and
// ba (TypeXGMI, TypePCIE or "": not reported) and its weight and hops.
// Readings that disagree are decided by InferLinkType, else TypePCIE,
// which claims no direct link the evidence does not show, with a note for
// a warning; the answer never depends on which reading is ab.
func ResolveLinkType(ab, ba string, weight, hops int) (typ, note string) {
	switch {
	case ab == ba:
		return ab, ""
	case ab == "":
		return ba, ""
	case ba == "":
		return ab, ""
	}
	// Name the readings in a fixed order, so the note does not depend on
	// the order of the rows either.
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

// weightHops describes the known ones of weight and hops ("weight 72 and
// hops 3"), or "", with the verbs that agree with it.
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
