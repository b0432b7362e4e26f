package nvidiasmi

import (
	"io"

	"github.com/amdrun/amdrun/internal/topology"
)

// P2P is `nvidia-smi topo -p2p <r|w|n|a|p>`: the peer-to-peer status of
// every GPU pair.
type P2P struct {
	// Status[i][j] is the cell of row GPUi, column GPUj: "X" on the
	// diagonal, else "OK", "CNS" (chipset not supported), "GNS" (GPU not
	// supported), "TNS" (topology not supported), "NS" (not supported) or
	// "U" (unknown).
	Status [][]string
}

// ParseP2P parses `nvidia-smi topo -p2p r` (or w, n, a, p): topo -m's
// layout with status cells. Errors are *topology.ParseError with Source
// SourceP2P; a topo -m matrix gives ErrWrongTool.
func ParseP2P(r io.Reader) (*P2P, error) {
	m, err := readMatrix(r, SourceP2P)
	if err != nil {
		return nil, err
	}
	p := &P2P{Status: make([][]string, m.nGPU)}
	for i := range m.cells {
		p.Status[i] = make([]string, m.nGPU)
		for j, c := range m.cells[i] {
			if err := checkCell(c.S, i == j, true); err != nil {
				return nil, topology.NewParseError(SourceP2P, m.rowLine[i], c.Col, err, "GPU%d/GPU%d cell %q", i, j, clip(c.S))
			}
			p.Status[i][j] = c.S
		}
	}
	return p, nil
}
