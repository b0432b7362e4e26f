package topology

import "testing"

func TestResolveLinkType(t *testing.T) {
	for _, tc := range []struct {
		ab, ba       string
		weight, hops int
		want, note   string
	}{
		{"XGMI", "XGMI", 15, 1, "XGMI", ""},
		{"", "PCIE", 40, 2, "PCIE", ""},
		{"XGMI", "", -1, -1, "XGMI", ""},
		// The 4 x MI100 case of issue 24.
		{"XGMI", "PCIE", 72, 3, "PCIE", "link type PCIE one way and XGMI the other; weight 72 and hops 3 say PCIE"},
		{"PCIE", "XGMI", 15, 1, "XGMI", "link type PCIE one way and XGMI the other; weight 15 and hops 1 say XGMI"},
		// MI300X CPX: 13 between partitions of one GPU.
		{"PCIE", "XGMI", 13, -1, "XGMI", "link type PCIE one way and XGMI the other; weight 13 says XGMI"},
		{"PCIE", "XGMI", 0, 2, "PCIE", "link type PCIE one way and XGMI the other; hops 2 say PCIE"},
		// Weight and hops that contradict each other, or a weight in the
		// band both kinds reach (41: MI300X CPX XGMI; 40: PCIe via one CPU).
		{"XGMI", "PCIE", 72, 1, "PCIE", "link type PCIE one way and XGMI the other; weight 72 and hops 1 do not decide; assuming PCIE"},
		{"XGMI", "PCIE", 41, -1, "PCIE", "link type PCIE one way and XGMI the other; weight 41 does not decide; assuming PCIE"},
		{"XGMI", "PCIE", -1, -1, "PCIE", "link type PCIE one way and XGMI the other, and no weight or hops; assuming PCIE"},
	} {
		for _, swap := range []bool{false, true} {
			ab, ba := tc.ab, tc.ba
			if swap {
				ab, ba = ba, ab
			}
			typ, note := ResolveLinkType(ab, ba, tc.weight, tc.hops)
			if typ != tc.want || note != tc.note {
				t.Errorf("ResolveLinkType(%q, %q, %d, %d) = %q, %q; want %q, %q", ab, ba, tc.weight, tc.hops, typ, note, tc.want, tc.note)
			}
		}
	}
}

func TestInferLinkType(t *testing.T) {
	for _, tc := range []struct {
		weight, hops int
		want         string
	}{
		{15, 1, TypeXGMI}, {30, 2, ""}, {13, 1, TypeXGMI}, {41, 1, TypeXGMI}, {0, 1, TypeXGMI}, {-1, 1, TypeXGMI}, {52, 1, ""},
		{40, 2, TypePCIE}, {52, 3, TypePCIE}, {72, 3, TypePCIE}, {-1, 3, TypePCIE},
		{15, -1, TypeXGMI}, {41, 0, ""}, {52, -1, TypePCIE}, {-1, -1, ""}, {0, 0, ""},
	} {
		if got := InferLinkType(tc.weight, tc.hops); got != tc.want {
			t.Errorf("InferLinkType(%d, %d) = %q, want %q", tc.weight, tc.hops, got, tc.want)
		}
	}
}

func TestCheckCountMatrix(t *testing.T) {
	grid := func(cells ...int64) func(r, c int) (int64, bool) {
		return func(r, c int) (int64, bool) { v := cells[r*3+c]; return v, v >= 0 }
	}
	label := func(i int) string { return string(rune('A' + i)) }
	if f := CheckCountMatrix(3, grid(0, 15, -1, 15, 0, 72, 72, 72, 0)); f != nil {
		t.Errorf("good matrix: %+v", f)
	}
	f := CheckCountMatrix(3, grid(0, 15, 72, 15, 0, 72, 15, 72, 0))
	if f == nil || f.Describe(label, "weight") != "C-A weight is 15 but A-C is 72; a row or column is out of place" {
		t.Errorf("asymmetric: %+v", f)
	}
	f = CheckCountMatrix(3, grid(0, 1, 1, 1, 0, 1, 1, 1, 2))
	if f == nil || f.Row != f.Col || f.Describe(label, "hops") != "C's hops to itself is 2, not 0; a row or column is out of place" {
		t.Errorf("diagonal: %+v", f)
	}
}
