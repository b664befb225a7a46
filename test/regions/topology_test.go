package regions

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"testing/iotest"

	"github.com/fcap-io/fcap/proto"
)

// TestTopologyRewriter: frames pass one by one, whatever the reads;
// a Topology's member addresses are mapped (unknown ones kept), every
// other frame passes byte for byte, and a torn frame is an error.
func TestTopologyRewriter(t *testing.T) {
	var addrs addrMap
	addrs.set("10.0.0.1:7700", "127.0.0.1:1001")
	addrs.set("10.0.0.2:7700", "127.0.0.1:1002")
	addrs.set("10.0.0.9:7700", "127.0.0.1:1002") // node 2 moved to 10.0.0.9
	topo := &proto.Topology{Epoch: 7, Partitions: 1, Replicas: 1, Owners: []uint16{1}, Members: []proto.Member{
		{Name: "b1", Addr: "10.0.0.1:7700"},
		{Name: "b2", Addr: "10.0.0.9:7700"},
		{Name: "b3", Addr: "10.0.0.3:7700"}, // not behind a proxy: kept
	}}
	status := &proto.Status{Name: "b1", Members: 3}
	var in []byte
	for i, m := range []proto.Message{status, topo, status} {
		var err error
		if in, err = proto.AppendFrame(in, uint64(i+1), m); err != nil {
			t.Fatal(err)
		}
	}
	out, err := io.ReadAll(newTopologyRewriter(iotest.OneByteReader(bytes.NewReader(in)), &addrs))
	if err != nil {
		t.Fatal(err)
	}
	r := proto.NewReader(bytes.NewReader(out), 0)
	for i, want := range []proto.Type{proto.TypeStatus, proto.TypeTopology, proto.TypeStatus} {
		h, body, err := r.Next()
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if h.Type != want || h.ID != uint64(i+1) {
			t.Fatalf("frame %d: %v id %d, want %v id %d", i, h.Type, h.ID, want, i+1)
		}
		if want != proto.TypeTopology {
			continue
		}
		var got proto.Topology
		if err := proto.Decode(body, &got); err != nil {
			t.Fatal(err)
		}
		addrsGot := []string{got.Members[0].Addr, got.Members[1].Addr, got.Members[2].Addr}
		if addrsGot[0] != "127.0.0.1:1001" || addrsGot[1] != "127.0.0.1:1002" || addrsGot[2] != "10.0.0.3:7700" || got.Epoch != 7 {
			t.Fatalf("rewritten topology: epoch %d, addresses %v", got.Epoch, addrsGot)
		}
	}
	if _, _, err := r.Next(); err != io.EOF {
		t.Fatalf("after the frames: %v, want EOF", err)
	}
	// The untouched frames are the same bytes.
	first, _ := proto.AppendFrame(nil, 1, status)
	if !bytes.HasPrefix(out, first) {
		t.Fatal("a Status frame changed on its way through")
	}
	if _, ok := addrs.get("10.0.0.2:7700"); ok {
		t.Fatal("a moved node's old address still maps to its proxy")
	}

	_, err = io.ReadAll(newTopologyRewriter(bytes.NewReader(in[:len(in)-3]), &addrs))
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("a torn frame: %v, want io.ErrUnexpectedEOF", err)
	}
}
