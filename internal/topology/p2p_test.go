package topology

import (
	"bytes"
	"strings"
	"testing"
)

// Without peer-to-peer access a pair's copies go through host memory:
// selection sees half the host path, below a pair that copies directly
// over the same PCIe path; the link keeps its theoretical figure.
func TestBWWithoutP2P(t *testing.T) {
	m := &Model{Source: "test", Devices: []Device{{Index: 0}, {Index: 1, RuntimeIndex: 1}, {Index: 2, RuntimeIndex: 2}}}
	if err := m.Finish(); err != nil {
		t.Fatal(err)
	}
	m.Link(0, 1).P2P = P2PUnavailable
	m.Link(0, 2).P2P = P2PAvailable
	if got := m.BW(0, 1); got != DefaultHostBandwidth/2 {
		t.Errorf("BW without P2P = %d, want %d", got, DefaultHostBandwidth/2)
	}
	if got := m.BW(0, 2); got != DefaultHostBandwidth {
		t.Errorf("BW with P2P = %d, want %d", got, DefaultHostBandwidth)
	}
	if got := m.BW(1, 2); got != DefaultHostBandwidth {
		t.Errorf("BW with P2P unknown = %d, want %d (unknown counts as available)", got, DefaultHostBandwidth)
	}
	if l := m.Link(0, 1); l.MaxBandwidth != DefaultHostBandwidth {
		t.Errorf("link keeps %d MB/s, want its theoretical %d", l.MaxBandwidth, DefaultHostBandwidth)
	}
	if got := HostStaged(400000, 0); got != DefaultHostBandwidth/2 {
		t.Errorf("HostStaged over XGMI = %d, want half the host path %d", got, DefaultHostBandwidth/2)
	}
}

func TestP2PJSON(t *testing.T) {
	m := &Model{Source: "test", Devices: []Device{{Index: 0}, {Index: 1, RuntimeIndex: 1}, {Index: 2, RuntimeIndex: 2}}}
	if err := m.Finish(); err != nil {
		t.Fatal(err)
	}
	m.Link(0, 1).P2P = P2PUnavailable
	m.Link(0, 2).P2P = P2PAvailable
	var b bytes.Buffer
	if err := WriteJSON(&b, m); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(b.String(), `"p2p": false`); n != 1 {
		t.Errorf("%d `\"p2p\": false` in\n%s", n, b.String())
	}
	if n := strings.Count(b.String(), `"p2p"`); n != 2 {
		t.Errorf("%d p2p fields, want 2 (unknown is left out)", n)
	}
	back, err := ReadJSON(&b)
	if err != nil {
		t.Fatal(err)
	}
	if back.Link(0, 1).P2P != P2PUnavailable || back.Link(0, 2).P2P != P2PAvailable || back.Link(1, 2).P2P != P2PUnknown {
		t.Errorf("round trip: %v %v %v", back.Link(0, 1).P2P, back.Link(0, 2).P2P, back.Link(1, 2).P2P)
	}
	if _, err := ReadJSON(strings.NewReader(`{"devices":[{"index":0},{"index":1,"runtime_index":1}],"links":[{"a":0,"b":1,"type":"pcie","p2p":"no"}]}`)); err == nil || !strings.Contains(err.Error(), "p2p") {
		t.Errorf("p2p \"no\": %v", err)
	}
}
