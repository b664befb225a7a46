package proto

import (
	"strings"
	"testing"
)

// TestShareAskBounds: a ShareAsk with a region name or a region list
// over its bound is neither encoded nor decoded.
func TestShareAskBounds(t *testing.T) {
	long := strings.Repeat("r", MaxRegionNameLen+1)
	for name, m := range map[string]*ShareAsk{
		"long region name":       {Region: long},
		"long name in the set":   {Region: "eu", Regions: []string{"eu", long}},
		"too many regions named": {Region: "eu", Regions: make([]string, MaxPeerRegions+2)},
	} {
		if _, err := AppendFrame(nil, 1, m); err == nil {
			t.Errorf("%s: encoded", name)
		}
	}
	longName := append([]byte{0xd9, MaxRegionNameLen + 1}, long...)
	tooMany := []byte{0xdc, 0, MaxPeerRegions + 2}
	for range MaxPeerRegions + 2 {
		tooMany = append(tooMany, 0xa1, 'r')
	}
	cap1 := []byte{0x96, 0xa1, 'c', 0xa1, 'i', 0x01, 0x01, 0x00, 0x01}
	for name, body := range map[string][]byte{
		"long region name":       append(append([]byte{0x95}, longName...), append([]byte{0x90, 0xa1, 'v'}, append(cap1, 0x01)...)...),
		"long name in the set":   append(append([]byte{0x95, 0xa2, 'e', 'u', 0x91}, longName...), append([]byte{0xa1, 'v'}, append(cap1, 0x01)...)...),
		"too many regions named": append(append([]byte{0x95, 0xa2, 'e', 'u'}, tooMany...), append([]byte{0xa1, 'v'}, append(cap1, 0x01)...)...),
	} {
		var m ShareAsk
		if err := Decode(body, &m); err == nil {
			t.Errorf("%s: decoded %+v", name, m)
		}
	}
	// The same shape within the bounds decodes.
	var m ShareAsk
	ok := append([]byte{0x95, 0xa2, 'e', 'u', 0x91, 0xa2, 'e', 'u', 0xa1, 'v'}, append(cap1, 0x01)...)
	if err := Decode(ok, &m); err != nil || m.Region != "eu" || len(m.Regions) != 1 || m.Viewer != "v" || m.Transfer != 1 {
		t.Errorf("within bounds: %v %+v", err, m)
	}
}
