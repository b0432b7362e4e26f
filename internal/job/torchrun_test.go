package job

import "testing"

// FuzzParseRdzvConf: no input panics; a parse that succeeds has no
// empty key or value.
func FuzzParseRdzvConf(f *testing.F) {
	for _, s := range []string{"", "join_timeout=60", "timeout=9, is_host=1", "=5", "a", "a=b=c,,", "read_timeout=x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		conf, keys, err := ParseRdzvConf(s)
		if err != nil {
			return
		}
		if len(keys) != len(conf) {
			t.Fatalf("%q: keys %q for %v", s, keys, conf)
		}
		for k, v := range conf {
			if k == "" || v == "" {
				t.Fatalf("%q: empty key or value in %v", s, conf)
			}
		}
	})
}
