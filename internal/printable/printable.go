// Package printable makes text from other users and programs safe to
// show on a terminal, on one line.
package printable

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// String makes s safe to print on a terminal, on one line, in at most
// max runes (max <= 0: no limit): control characters, bidirectional
// overrides and bytes that are not UTF-8 are written as Go escapes, and
// a longer result is cut with "...".
func String(s string, max int) string {
	var pieces []string
	n := 0
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		var piece string
		switch {
		case r == utf8.RuneError && size == 1:
			piece = fmt.Sprintf(`\x%02x`, s[i])
		case r < 0x80 && unicode.IsControl(r):
			piece = fmt.Sprintf(`\x%02x`, r)
		case unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) || r == '\u2028' || r == '\u2029':
			piece = fmt.Sprintf(`\u%04x`, r)
		default:
			piece = s[i : i+size]
		}
		pieces = append(pieces, piece)
		n += utf8.RuneCountInString(piece)
		i += size
	}
	if max <= 0 || n <= max {
		return strings.Join(pieces, "")
	}
	// Cut between pieces, so that an escape is never left half written.
	var b strings.Builder
	room := max - 3
	for _, p := range pieces {
		c := utf8.RuneCountInString(p)
		if c > room {
			break
		}
		b.WriteString(p)
		room -= c
	}
	b.WriteString("...")
	return b.String()
}
