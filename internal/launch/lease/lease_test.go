package lease

import (
	"bufio"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/amdrun/amdrun/internal/testutil"
)

func TestFileName(t *testing.T) {
	tests := []struct {
		key     string
		want    string
		wantErr error
	}{
		{key: "0000:0c:00.0", want: "0000:0c:00.0.lock"},
		{key: "0000:0c:00.0.p3", want: "0000:0c:00.0.p3.lock"},
		{key: "gpu3", want: "gpu3.lock"},
		{key: ".hidden", want: "%2Ehidden.lock"},
		{key: "..", want: "%2E..lock"},
		{key: "../../etc/passwd", want: "%2E.%2F..%2Fetc%2Fpasswd.lock"},
		{key: "a/b", want: "a%2Fb.lock"},
		{key: "%41", want: "%2541.lock"},
		{key: "a b\x00", want: "a%20b%00.lock"},
		{key: "", wantErr: ErrBadKey},
		{key: strings.Repeat("x", 251), wantErr: ErrBadKey},
		{key: strings.Repeat("x", 250), want: strings.Repeat("x", 250) + ".lock"},
	}
	for _, tt := range tests {
		got, err := FileName(tt.key)
		if tt.wantErr != nil {
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("FileName(%q) error = %v, want %v", tt.key, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("FileName(%q) = %q, %v; want %q", tt.key, got, err, tt.want)
			continue
		}
		if back, ok := KeyFromFileName(got); !ok || back != tt.key {
			t.Errorf("KeyFromFileName(%q) = %q, %v; want %q", got, back, ok, tt.key)
		}
	}
}

func TestKeyFromFileNameRejects(t *testing.T) {
	for _, name := range []string{
		".lock",        // the node lock
		"gpu0",         // no suffix
		".x.lock",      // leading dot
		"a%2.lock",     // short escape
		"a%zz.lock",    // bad hex
		"a%2f.lock",    // lower-case hex: FileName never writes it
		"%41.lock",     // 'A' needs no escape
		"a b.lock",     // unescaped space
		"queue",        // the queue directory
		"%2E%2E.lock",  // only a leading dot is escaped
		"x%2Fy%2.lock", // trailing short escape
		"00000000000000000001-0000000001.lock" + "x", // not .lock
	} {
		if k, ok := KeyFromFileName(name); ok {
			t.Errorf("KeyFromFileName(%q) = %q, true; want false", name, k)
		}
	}
}

func TestHolderString(t *testing.T) {
	h := Holder{PID: 42, User: "alice", Command: "amdrun -n 2 train.py"}
	if got, want := h.String(), "pid 42 (alice: amdrun -n 2 train.py)"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if got, want := (Holder{PID: 7, UID: 1000}).String(), "pid 7 (uid 1000)"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

// FuzzFileName checks that every key gives a safe file name (or ErrBadKey)
// and that the name decodes back to the key.
func FuzzFileName(f *testing.F) {
	fh, err := os.Open(testutil.Testdata(f, "lease", "keys.txt"))
	if err != nil {
		f.Fatal(err)
	}
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		f.Add(sc.Text())
	}
	fh.Close()
	f.Fuzz(func(t *testing.T, key string) {
		name, err := FileName(key)
		if err != nil {
			if !errors.Is(err, ErrBadKey) {
				t.Fatalf("FileName(%q) error %v does not wrap ErrBadKey", key, err)
			}
			return
		}
		if strings.ContainsAny(name, "/\x00") || name[0] == '.' || len(name) > 255 || name == "queue" {
			t.Fatalf("FileName(%q) = %q is not a safe file name", key, name)
		}
		back, ok := KeyFromFileName(name)
		if !ok || back != key {
			t.Fatalf("KeyFromFileName(FileName(%q)=%q) = %q, %v", key, name, back, ok)
		}
	})
}
