package topology

import "testing"

func TestNormalizePCI(t *testing.T) {
	tests := []struct {
		in, want string
		ok       bool
	}{
		{"00000000:18:00.0", "0000:18:00.0", true},
		{"00000000:DB:00.0", "0000:db:00.0", true},
		{"0001:0A:1f.7", "0001:0a:1f.7", true},
		{"0000C3B1:00:00.0", "c3b1:00:00.0", true},
		{"000100000:18:00.0", "", false},
		{"18:00.0", "0000:18:00.0", true}, // rocm_bandwidth_test and amd-smi print no domain,
		{"0000:18:20.0", "", false},
		{"0000:18:00.8", "", false},
		{"0000:118:00.0", "", false},
	}
	for _, tt := range tests {
		got, ok := NormalizePCI(tt.in)
		if got != tt.want || ok != tt.ok {
			t.Errorf("NormalizePCI(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}
