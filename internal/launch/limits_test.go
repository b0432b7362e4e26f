package launch

import (
	"runtime"
	"testing"
)

func TestRankLimit(t *testing.T) {
	n, why := RankLimit()
	if n <= 0 || n > ranksPerCPU*runtime.NumCPU() || why == "" {
		t.Errorf("RankLimit() = %d, %q", n, why)
	}
}
