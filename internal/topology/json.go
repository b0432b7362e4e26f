package topology

import (
	"encoding/json"
	"fmt"
	"io"
)

// WriteJSON writes a finished model as indented JSON, the format
// `amdrun topo --json` prints and ReadJSON reads back.
func WriteJSON(w io.Writer, m *Model) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(m)
}

// ReadJSON reads a model saved by WriteJSON, finishes and validates it.
// Errors name the source "topology file" and, for syntax errors, the line.
func ReadJSON(r io.Reader) (*Model, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("topology file: %w", err)
	}
	var m Model
	if err := json.Unmarshal(data, &m); err != nil {
		pe := &ParseError{Source: "topology file", Err: fmt.Errorf("%w: %v", ErrSyntax, err)}
		if se, ok := err.(*json.SyntaxError); ok {
			pe.Line, pe.Column = LineCol(data, se.Offset)
		}
		return nil, pe
	}
	if len(m.Devices) == 0 {
		return nil, &ParseError{Source: "topology file", Err: ErrNoDevices}
	}
	if m.Source == "" {
		m.Source = "file"
	}
	if err := m.Finish(); err != nil {
		return nil, &ParseError{Source: "topology file", Err: err}
	}
	return &m, nil
}
