package job

import (
	"slices"
	"testing"
)

// FuzzRdzvConfKeys: no input panics; a parse that succeeds has no empty
// or repeated key.
func FuzzRdzvConfKeys(f *testing.F) {
	for _, s := range []string{"", "join_timeout=60", "timeout=9, is_host=1", "=5", "a", "a=b=c,,", "read_timeout=x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		keys, err := rdzvConfKeys(s)
		if err != nil {
			return
		}
		for i, k := range keys {
			if k == "" || slices.Contains(keys[:i], k) {
				t.Fatalf("%q: keys %q", s, keys)
			}
		}
	})
}
