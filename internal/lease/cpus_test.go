package lease

import (
	"strings"
	"testing"
)

func TestCPUKeys(t *testing.T) {
	for _, tt := range []struct {
		key string
		cpu int
		ok  bool
	}{
		{"cpu:0", 0, true}, {"cpu:191", 191, true}, {"cpu:007", 0, false}, {"cpu:-1", 0, false},
		{"cpu:", 0, false}, {"cpu:1x", 0, false}, {"gpu3", 0, false}, {"0000:63:00.0", 0, false}, {"cpu:+1", 0, false},
	} {
		c, ok := CPUOfKey(tt.key)
		if c != tt.cpu || ok != tt.ok {
			t.Errorf("CPUOfKey(%q) = %d %v, want %d %v", tt.key, c, ok, tt.cpu, tt.ok)
		}
	}
	name, err := FileName(CPUKey(12))
	if err != nil || name != "cpu:12.lock" {
		t.Errorf("FileName(CPUKey(12)) = %q %v", name, err)
	}
	if k, ok := KeyFromFileName(name); !ok || k != "cpu:12" {
		t.Errorf("KeyFromFileName(%q) = %q %v", name, k, ok)
	}
}

func TestGroupCPUs(t *testing.T) {
	a, b := Holder{PID: 10}, Holder{PID: 20}
	got := GroupCPUs(map[int]State{5: {Holder: b}, 0: {Holder: a}, 1: {Holder: a}, 4: {Holder: b}, 2: {Holder: a}})
	if len(got) != 2 || got[0].Holder.PID != 10 || len(got[0].CPUs) != 3 || got[1].Holder.PID != 20 || got[1].CPUs[0] != 4 {
		t.Errorf("GroupCPUs: %+v", got)
	}
}

// FuzzCPUOfKey: a key that parses is exactly the key of its CPU.
func FuzzCPUOfKey(f *testing.F) {
	for _, s := range []string{"cpu:0", "cpu:42", "cpu:-3", "cpu:", "gpu1", "cpu:1e3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		c, ok := CPUOfKey(key)
		if ok && (c < 0 || CPUKey(c) != key) {
			t.Errorf("CPUOfKey(%q) = %d, but CPUKey(%d) = %q", key, c, c, CPUKey(c))
		}
		if !ok && strings.HasPrefix(key, cpuKeyPrefix) && c != 0 {
			t.Errorf("CPUOfKey(%q) failed with %d", key, c)
		}
	})
}
