package proto

import (
	"strings"
	"testing"
)

// TestRegionDigestBounds: a RegionDigest or its answer over a bound, or
// one no node could answer (a partition past the count, a slice past the
// slices, keys out of order), is neither encoded nor decoded; at the
// limits both round-trip.
func TestRegionDigestBounds(t *testing.T) {
	ok := RegionDigest{Origin: "eu", Partitions: 271, Partition: 3, Slices: 2, Slice: 1, Keys: []uint64{1, 2, 3}}
	bad := map[string]func(m *RegionDigest){
		"long region name":   func(m *RegionDigest) { m.Origin = strings.Repeat("r", MaxRegionNameLen+1) },
		"too many keys":      func(m *RegionDigest) { m.Keys = make([]uint64, MaxRegionDigestKeys+1) },
		"keys not ascending": func(m *RegionDigest) { m.Keys = []uint64{3, 2} },
		"duplicate keys":     func(m *RegionDigest) { m.Keys = []uint64{2, 2} },
		"no partitions":      func(m *RegionDigest) { m.Partitions, m.Partition = 0, 0 },
		"partition past":     func(m *RegionDigest) { m.Partition = 271 },
		"slice past":         func(m *RegionDigest) { m.Slice = 2 },
		"too many slices":    func(m *RegionDigest) { m.Slices, m.Slice = MaxRegionDigestSlices+1, 0 },
	}
	for name, spoil := range bad {
		m := ok
		spoil(&m)
		// Forged past the encoder: the spoilt fields are written even
		// when the encoder refuses them.
		e := &encoder{}
		m.encode(e)
		if err := Decode(e.buf, &RegionDigest{}); err == nil {
			t.Errorf("%s: decoded", name)
		}
		if m.Check() == nil && e.err == nil {
			t.Errorf("%s: neither Check nor the encoder refuse it", name)
		}
	}
	if _, err := AppendFrame(nil, 1, &RegionDigestResult{Digests: make([]ViewerDigest, MaxRegionDigests+1)}); err == nil {
		t.Error("a result over MaxRegionDigests encoded")
	}
	if err := Decode([]byte{0x93, 0x00, 0xc4, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0xc2}, &RegionDigestResult{}); err == nil {
		t.Error("a result of one word (not a pair) decoded")
	}
	m := ok
	m.Keys = make([]uint64, MaxRegionDigestKeys)
	for i := range m.Keys {
		m.Keys[i] = uint64(i)
	}
	frame, err := AppendFrame(nil, 1, &m)
	if err != nil {
		t.Fatal(err)
	}
	var got RegionDigest
	if err := Decode(frame[HeaderSize:], &got); err != nil || len(got.Keys) != MaxRegionDigestKeys || !got.HasKey(MaxRegionDigestKeys-1) || got.HasKey(MaxRegionDigestKeys) {
		t.Errorf("at the limits: %v, %d keys", err, len(got.Keys))
	}
	res := &RegionDigestResult{Digests: make([]ViewerDigest, MaxRegionDigests)}
	if _, err := AppendFrame(nil, 1, res); err != nil {
		t.Errorf("a result at MaxRegionDigests: %v", err)
	}
}

// TestRegionDigestInSlice: a viewer is in the request's slice only when
// its partition is the one asked for.
func TestRegionDigestInSlice(t *testing.T) {
	m := RegionDigest{Partitions: 7, Partition: 3, Slices: 2, Slice: 1}
	in := 0
	for key := uint64(0); key < 700; key++ {
		if m.InSlice(key) {
			in++
			if key%7 != 3 || (key/7)%2 != 1 {
				t.Fatalf("key %d in partition 3 slice 1 of 2", key)
			}
		}
	}
	if in != 50 {
		t.Errorf("%d of 700 keys in one slice of one partition, want 50", in)
	}
}
