package iostreams

import (
	"bytes"
	"os"
	"testing"
)

// Help is wrapped to DefaultWidth unless Out is a terminal that says its
// width; /dev/null is a character device, as a terminal, that does not.
func TestWidth(t *testing.T) {
	var b bytes.Buffer
	for _, s := range []*IOStreams{New(nil, &b, &b, false, false), New(nil, &b, &b, true, false), {stdoutTTY: false, width: 120}} {
		if got := s.Width(); got != DefaultWidth {
			t.Errorf("Width() = %d, want %d", got, DefaultWidth)
		}
	}
	if s := (&IOStreams{stdoutTTY: true, width: 120}); s.Width() != 120 {
		t.Errorf("a terminal of 120 columns: Width() = %d", s.Width())
	}
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	if w := terminalWidth(null); w != 0 {
		t.Errorf("terminalWidth(%s) = %d, want 0", os.DevNull, w)
	}
}
