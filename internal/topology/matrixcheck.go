package topology

import "fmt"

// MatrixFault is the first cell of a device x device count matrix (Weight,
// Hops) that is not 0 on the diagonal or not symmetric.
type MatrixFault struct {
	// Row and Col locate the cell, 0-based; Row == Col on the diagonal,
	// else Row > Col.
	Row, Col int
	// Value is the cell's count; Mirror the count at (Col, Row).
	Value, Mirror int64
}

// Diagonal reports whether the fault is a device's count to itself.
func (f *MatrixFault) Diagonal() bool { return f.Row == f.Col }

// Describe names the fault in one line, label naming a row or column and
// what the matrix: "GPU1-GPU0 weight is 15 but GPU0-GPU1 is 72; a row or
// column is out of place".
func (f *MatrixFault) Describe(label func(int) string, what string) string {
	if f.Diagonal() {
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
