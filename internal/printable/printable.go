// Package printable makes text from other users and other programs (a
// holder's command line, a rank's error file) safe to show on a terminal,
// on one line. It is a leaf, shared by the lease directory, the launcher's
// failure summary and the commands.
package printable

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// String makes s safe to print on a terminal, on one line, in at most
// max runes (max <= 0: no limit): control characters (C0, DEL, C1), the
// bidirectional overrides that reorder what a terminal shows, and bytes
// that are not UTF-8 are written as Go escapes (\x1b, \u202e), and a
// longer result is cut with "...". Whatever another user puts in its
// command line reaches people only through it.
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
