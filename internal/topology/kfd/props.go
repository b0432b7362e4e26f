package kfd

import (
	"bufio"
	"fmt"
	"io"
	"strconv"

	"github.com/amdrun/amdrun/internal/topology"
)

// Props is one KFD `properties` file: key to unsigned value.
type Props map[string]uint64

// Get returns the value of key and whether the file has it.
func (p Props) Get(key string) (uint64, bool) {
	v, ok := p[key]
	return v, ok
}

// ParseProperties reads a KFD `properties` file (node, io_link, p2p_link
// or mem_bank): one "key value" line each, the value an unsigned decimal
// number, as the kernel prints them. Blank lines are skipped. A line with
// another shape, a key used twice or a value that is not a number gives a
// *topology.ParseError naming source and the 1-based line, wrapping
// topology.ErrSyntax or topology.ErrBadNumber. It opens nothing itself.
func ParseProperties(r io.Reader, source string) (Props, error) {
	p := Props{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		key, val, col, err := splitLine(sc.Text())
		if err != nil {
			return nil, &topology.ParseError{Source: source, Line: line, Column: col, Err: err}
		}
		if key == "" {
			continue
		}
		if _, dup := p[key]; dup {
			return nil, &topology.ParseError{Source: source, Line: line, Column: 0,
				Err: fmt.Errorf("%w: key %q given twice", topology.ErrSyntax, key)}
		}
		v, perr := strconv.ParseUint(val, 10, 64)
		if perr != nil {
			return nil, &topology.ParseError{Source: source, Line: line, Column: col,
				Err: fmt.Errorf("%w: %s %q", topology.ErrBadNumber, key, val)}
		}
		p[key] = v
	}
	if err := sc.Err(); err != nil {
		return nil, &topology.ParseError{Source: source, Line: line + 1,
			Err: fmt.Errorf("%w: %v", topology.ErrSyntax, err)}
	}
	return p, nil
}

// splitLine splits "key value" into its two fields. It returns key "" for
// a blank line, and for a bad line the 0-based column of the problem. col
// is the column where the value starts.
func splitLine(s string) (key, val string, col int, err error) {
	i := 0
	skip := func() {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r') {
			i++
		}
	}
	field := func() string {
		start := i
		for i < len(s) && s[i] != ' ' && s[i] != '\t' && s[i] != '\r' {
			i++
		}
		return s[start:i]
	}
	skip()
	if i == len(s) {
		return "", "", 0, nil
	}
	keyCol := i
	key = field()
	for j := 0; j < len(key); j++ {
		c := key[j]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return "", "", keyCol + j, fmt.Errorf("%w: bad character %q in key", topology.ErrSyntax, c)
		}
	}
	skip()
	if i == len(s) {
		return "", "", i, fmt.Errorf("%w: key %q has no value", topology.ErrSyntax, key)
	}
	col = i
	val = field()
	skip()
	if i != len(s) {
		return "", "", i, fmt.Errorf("%w: more than two fields", topology.ErrSyntax)
	}
	return key, val, col, nil
}
