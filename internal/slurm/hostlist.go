// Package slurm reads a Slurm allocation from the environment (nodes,
// this node's rank, rendezvous address and port, GPU grant) and expands
// hostlists; the environment and the scontrol runner are passed in.
package slurm

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/amdrun/amdrun/internal/topology"
)

// MaxHosts is the most host names one hostlist may expand to, so that a
// typo such as n[1-1000000000] fails at once instead of filling memory.
const MaxHosts = 65536

// Sentinel errors of ParseHostlist, wrapped in its *topology.ParseError.
var (
	// ErrUnbalanced: a '[' without its ']', a ']' without its '[', or a
	// '[' inside brackets.
	ErrUnbalanced = errors.New("unbalanced bracket")
	// ErrEmptyElement: nothing between two commas, an empty "[]" or an
	// empty hostlist.
	ErrEmptyElement = errors.New("empty element")
	// ErrNotNumeric: a bracket element that is not a number or a range
	// of two numbers (lo-hi).
	ErrNotNumeric = errors.New("not a number or a range lo-hi")
	// ErrReversedRange: a range whose end is below its start.
	ErrReversedRange = errors.New("range end is below its start")
	// ErrTooManyHosts: the hostlist expands to more than MaxHosts names.
	ErrTooManyHosts = errors.New("expands to more than 65536 hosts")
	// ErrBadChar: a space or control character in a host name.
	ErrBadChar = errors.New("invalid character")
)

// ParseHostlist expands a Slurm hostlist such as "gpu[01-04,07],login1"
// into host names, in order, duplicates kept: gpu01 gpu02 gpu03 gpu04
// gpu07 login1. A range keeps the zero padding of its start (n[008-011]);
// several bracket groups expand as a product, the last varying fastest
// (rack[1-2]-n[1-2]: rack1-n1 rack1-n2 rack2-n1 rack2-n2). Spaces around
// the list are ignored. Malformed input returns a *topology.ParseError
// naming the input, Column the 0-based offset of the problem, Err
// wrapping one of the sentinels above.
func ParseHostlist(s string) ([]string, error) {
	return (&hostlistParser{src: s}).parse()
}

type hostlistParser struct {
	src   string
	total int
}

// fail builds the error for offset col of the (untrimmed) input.
func (p *hostlistParser) fail(col int, err error) error {
	return topology.NewParseError("slurm hostlist "+quoteShort(p.src), 0, col, fmt.Errorf("column %d: %w", col, err), "")
}

// quoteShort quotes s for an error message, cut to 80 bytes.
func quoteShort(s string) string {
	const max = 80
	if len(s) > max {
		return strconv.Quote(s[:max]) + "..."
	}
	return strconv.Quote(s)
}

func (p *hostlistParser) parse() ([]string, error) {
	start := len(p.src) - len(strings.TrimLeft(p.src, " \t\r\n"))
	end := len(strings.TrimRight(p.src, " \t\r\n"))
	if start >= end {
		return nil, p.fail(0, ErrEmptyElement)
	}
	var out []string
	depth, open, elem := 0, -1, start
	for i := start; i <= end; i++ {
		if i == end || (p.src[i] == ',' && depth == 0) {
			if depth != 0 {
				return nil, p.fail(open, ErrUnbalanced)
			}
			names, err := p.element(elem, i)
			if err != nil {
				return nil, err
			}
			out = append(out, names...)
			elem = i + 1
			continue
		}
		switch c := p.src[i]; {
		case c == '[':
			if depth != 0 {
				return nil, p.fail(i, ErrUnbalanced)
			}
			depth, open = 1, i
		case c == ']':
			if depth == 0 {
				return nil, p.fail(i, ErrUnbalanced)
			}
			depth = 0
		case c <= ' ' || c == 0x7f:
			return nil, p.fail(i, ErrBadChar)
		}
	}
	return out, nil
}

// element expands src[lo:hi], one host pattern with balanced brackets
// and no top-level comma.
func (p *hostlistParser) element(lo, hi int) ([]string, error) {
	if lo == hi {
		return nil, p.fail(lo, ErrEmptyElement)
	}
	names := []string{""}
	for i := lo; i < hi; {
		j := strings.IndexByte(p.src[i:hi], '[')
		if j < 0 {
			j = hi - i
		}
		if j > 0 { // a literal run
			lit := p.src[i : i+j]
			for k := range names {
				names[k] += lit
			}
			i += j
			continue
		}
		closeAt := i + strings.IndexByte(p.src[i:hi], ']') // balanced: found
		group, err := p.group(i+1, closeAt)
		if err != nil {
			return nil, err
		}
		if len(names)*len(group) > MaxHosts-p.total {
			return nil, p.fail(lo, ErrTooManyHosts)
		}
		product := make([]string, 0, len(names)*len(group))
		for _, n := range names {
			for _, g := range group {
				product = append(product, n+g)
			}
		}
		names = product
		i = closeAt + 1
	}
	p.total += len(names)
	return names, nil
}

// group expands the inside of one bracket pair, src[lo:hi].
func (p *hostlistParser) group(lo, hi int) ([]string, error) {
	var out []string
	for i := lo; i <= hi; {
		j := strings.IndexByte(p.src[i:hi], ',')
		if j < 0 {
			j = hi - i
		}
		part := p.src[i : i+j]
		if part == "" {
			return nil, p.fail(i, ErrEmptyElement)
		}
		first, last, isRange := strings.Cut(part, "-")
		a, ok := parseNum(first)
		if !ok {
			return nil, p.fail(i, ErrNotNumeric)
		}
		b := a
		if isRange {
			if b, ok = parseNum(last); !ok {
				return nil, p.fail(i+len(first)+1, ErrNotNumeric)
			}
			if b < a {
				return nil, p.fail(i, ErrReversedRange)
			}
		}
		if b-a >= uint64(MaxHosts-len(out)) {
			return nil, p.fail(i, ErrTooManyHosts)
		}
		for n := a; n <= b; n++ {
			out = append(out, fmt.Sprintf("%0*d", len(first), n)) // the start's padding, as Slurm
		}
		i += j + 1
	}
	return out, nil
}

// parseNum accepts 1 to 18 decimal digits (ParseUint takes no sign, and
// no "_" in base 10), so that no range arithmetic can overflow.
func parseNum(s string) (uint64, bool) {
	n, err := strconv.ParseUint(s, 10, 64)
	return n, err == nil && len(s) <= 18
}
