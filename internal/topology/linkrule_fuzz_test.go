package topology

import "testing"

// FuzzResolveLinkType: the rule never depends on which reading comes
// first, answers XGMI, PCIE or (both readings unknown) nothing, warns
// exactly when the readings disagree, and follows InferLinkType when it
// decides.
func FuzzResolveLinkType(f *testing.F) {
	f.Add("XGMI", "PCIE", 72, 3)
	f.Add("PCIE", "XGMI", 15, 1)
	f.Add("", "XGMI", -1, -1)
	f.Add("XGMI", "PCIE", 41, 0)
	f.Fuzz(func(t *testing.T, ab, ba string, weight, hops int) {
		norm := func(s string) string {
			switch len(s) % 3 {
			case 0:
				return ""
			case 1:
				return TypeXGMI
			}
			return TypePCIE
		}
		ab, ba = norm(ab), norm(ba)
		typ, note := ResolveLinkType(ab, ba, weight, hops)
		typ2, note2 := ResolveLinkType(ba, ab, weight, hops)
		if typ != typ2 || note != note2 {
			t.Fatalf("order matters: %q %q vs %q %q", typ, note, typ2, note2)
		}
		conflict := ab != "" && ba != "" && ab != ba
		if (note != "") != conflict {
			t.Fatalf("note %q for readings %q, %q", note, ab, ba)
		}
		switch {
		case ab == "" && ba == "":
			if typ != "" {
				t.Fatalf("type %q from no reading", typ)
			}
		case typ != TypeXGMI && typ != TypePCIE:
			t.Fatalf("type %q", typ)
		}
		if inf := InferLinkType(weight, hops); conflict && inf != "" && typ != inf {
			t.Fatalf("conflict resolved to %q, weight %d hops %d say %q", typ, weight, hops, inf)
		}
	})
}
