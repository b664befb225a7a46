package security

import (
	"bytes"
	"testing"

	"github.com/hashicorp/memberlist"
)

func TestRemoveGossipKeyKeepsThePrimaryAndTheOthers(t *testing.T) {
	k := func(b byte) []byte { return bytes.Repeat([]byte{b}, 16) }
	for _, c := range []struct {
		name   string
		keys   [][]byte // primary first
		remove []byte
		want   [][]byte
		fails  bool
	}{
		{"last", [][]byte{k(1), k(2)}, k(2), [][]byte{k(1)}, false},
		{"middle", [][]byte{k(1), k(2), k(3), k(4)}, k(3), [][]byte{k(1), k(2), k(4)}, false},
		{"absent", [][]byte{k(1), k(2)}, k(9), [][]byte{k(1), k(2)}, false},
		{"primary", [][]byte{k(1), k(2)}, k(1), [][]byte{k(1), k(2)}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			kr, err := memberlist.NewKeyring(c.keys[1:], c.keys[0])
			if err != nil {
				t.Fatal(err)
			}
			err = removeGossipKey(kr, c.remove)
			if (err != nil) != c.fails {
				t.Fatalf("err %v, want failure %v", err, c.fails)
			}
			got := kr.GetKeys()
			if !bytes.Equal(got[0], c.keys[0]) {
				t.Fatalf("primary changed to %x", got[0])
			}
			if len(got) != len(c.want) {
				t.Fatalf("keys %x, want %x", got, c.want)
			}
			for _, w := range c.want {
				found := false
				for _, g := range got {
					found = found || bytes.Equal(g, w)
				}
				if !found {
					t.Fatalf("key %x lost: %x", w, got)
				}
			}
		})
	}
}
