package topology

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
)

// WriteJSON writes a finished model as `amdrun topo --json` does.
func WriteJSON(w io.Writer, m *Model) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(m)
}

// ReadJSON reads a model saved by WriteJSON, finishes and validates it;
// errors name the source "topology file".
func ReadJSON(r io.Reader) (*Model, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("topology file: %w", err)
	}
	var m Model
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, JSONError("topology file", data, err)
	}
	if len(m.Devices) == 0 {
		return nil, NewParseError("topology file", 0, 0, ErrNoDevices, "")
	}
	m.Source = cmp.Or(m.Source, "file")
	if err := m.Finish(); err != nil {
		return nil, NewParseError("topology file", 0, 0, err, "")
	}
	return &m, nil
}

// JSONError is the *ParseError of an encoding/json error err decoding data
// (nil when unknown): ErrSyntax with JSONProblem's wording, at the
// offending byte when err says where.
func JSONError(source string, data []byte, err error) *ParseError {
	off := int64(-1)
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		off = se.Offset - 1 // Offset counts the offending byte
	case errors.As(err, &te):
		off = te.Offset - 1 // and here the value's last byte
	}
	line, col := 0, 0
	if data != nil && off >= 0 {
		line, col = LineCol(data, off)
	}
	return NewParseError(source, line, col, ErrSyntax, "%s", JSONProblem(err))
}

// JSONProblem words an encoding/json error for people: a value of the
// wrong kind by JSON path and kinds ("devices.index: a string where a
// whole number belongs"), never by Go types; other errors keep their text.
func JSONProblem(err error) string {
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) {
		return err.Error()
	}
	got := "a " + te.Value // "string", "number", "number 1.5", "array", "object", "bool"
	switch te.Value {
	case "array", "object":
		got = "an " + te.Value
	case "bool":
		got = "true or false"
	}
	want := "another kind of value"
	if te.Type != nil {
		want = cmp.Or(jsonKinds[te.Type.Kind()], want)
	}
	msg := got + " where " + want + " belongs"
	if te.Field != "" {
		msg = te.Field + ": " + msg
	}
	return msg
}

// jsonKinds words the Go kinds JSONProblem names.
var jsonKinds = map[reflect.Kind]string{
	reflect.Map: "an object", reflect.Struct: "an object", reflect.Slice: "an array", reflect.Array: "an array",
	reflect.String: "a string", reflect.Bool: "true or false", reflect.Float32: "a number", reflect.Float64: "a number",
	reflect.Int: "a whole number", reflect.Int8: "a whole number", reflect.Int16: "a whole number",
	reflect.Int32: "a whole number", reflect.Int64: "a whole number", reflect.Uint: "a whole number",
	reflect.Uint8: "a whole number", reflect.Uint16: "a whole number", reflect.Uint32: "a whole number",
	reflect.Uint64: "a whole number",
}
