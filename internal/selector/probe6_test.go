package selector

import (
	"testing"
	"time"
)

func TestProbeSlow(t *testing.T) {
	m := newDistinctNode(t, 64, 11)
	ch, _ := Select(m, Request{N: 49, Budget: time.Hour, Work: 40000}, Ring)
	t.Logf("ring %v work %d", ch.Score.Terms[0].Value, ch.Work)
}
