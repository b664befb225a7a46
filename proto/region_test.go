package proto

import (
	"errors"
	"strings"
	"testing"
)

// TestRegionMergeBounds: nothing over its bound is encoded or decoded:
// the region name, the states, the refused keys; a refused list that is
// not whole uint64s is refused.
func TestRegionMergeBounds(t *testing.T) {
	for name, m := range map[string]Message{
		"long region name":      &RegionMerge{Region: strings.Repeat("r", MaxRegionNameLen+1)},
		"states over the limit": &RegionMerge{Region: "eu", States: make([]byte, MaxReplicateBytes+1)},
		"too many refused":      &RegionMergeResult{Refused: make([]uint64, MaxRegionRefused+1)},
	} {
		if _, err := AppendFrame(nil, 1, m); err == nil {
			t.Errorf("%s: encoded", name)
		}
	}
	// The same, forged on the wire past the encoder.
	forged := func(parts ...[]byte) []byte {
		var b []byte
		for _, p := range parts {
			b = append(b, p...)
		}
		return b
	}
	bin := func(n int) []byte { // a bin32 header and n bytes
		return append([]byte{0xc6, byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}, make([]byte, n)...)
	}
	longName := append([]byte{0xd9, MaxRegionNameLen + 1}, strings.Repeat("r", MaxRegionNameLen+1)...)
	for name, c := range map[string]struct {
		body []byte
		into Message
	}{
		"long region name":            {forged([]byte{0x93}, longName, []byte{0x00}, bin(0)), &RegionMerge{}},
		"states over the limit":       {forged([]byte{0x93, 0xa2, 'e', 'u', 0x00}, bin(MaxReplicateBytes+1)), &RegionMerge{}},
		"too many refused":            {forged([]byte{0x93, 0x00, 0x00}, bin(8*(MaxRegionRefused+1))), &RegionMergeResult{}},
		"refused not uint64s":         {forged([]byte{0x93, 0x00, 0x00}, bin(12)), &RegionMergeResult{}},
		"states claim more than sent": {forged([]byte{0x93, 0xa2, 'e', 'u', 0x00}, []byte{0xc6, 0, 0, 0x10, 0}), &RegionMerge{}},
	} {
		if err := Decode(c.body, c.into); err == nil {
			t.Errorf("%s: decoded %+v", name, c.into)
		}
	}
	// At the limits, both round-trip.
	m := &RegionMerge{Region: strings.Repeat("r", MaxRegionNameLen), States: make([]byte, MaxReplicateBytes)}
	frame, err := AppendFrame(nil, 1, m)
	if err != nil {
		t.Fatal(err)
	}
	var got RegionMerge
	if err := Decode(frame[HeaderSize:], &got); err != nil || got.Region != m.Region || len(got.States) != MaxReplicateBytes {
		t.Errorf("at the limits: %v, region %q, %d state bytes", err, got.Region, len(got.States))
	}
	if !errors.Is(Decode([]byte{0x92, 0x00, 0x00}, &RegionMergeResult{}), ErrBadRequest) {
		t.Error("a short RegionMergeResult is not a bad request")
	}
}
