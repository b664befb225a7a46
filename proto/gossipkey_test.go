package proto

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

func TestGossipKeyMessagesRoundTrip(t *testing.T) {
	for _, m := range []Message{
		&GossipKey{Op: GossipKeyList},
		&GossipKey{Op: GossipKeyInstall, Key: "c2l4dGVlbi1ieXRlLWtleQ=="},
		&GossipKeyResult{},
		&GossipKeyResult{Primary: "00112233aabbccdd", Keys: []string{"00112233aabbccdd", "ffeeddcc00112233"}},
	} {
		h, body := frameOf(t, 9, m)
		got := NewMessage(h.Type)
		if reflect.TypeOf(got) != reflect.TypeOf(m) {
			t.Fatalf("NewMessage(%v) is %T, want %T", h.Type, got, m)
		}
		if err := Decode(body, got); err != nil {
			t.Fatalf("%T: %v", m, err)
		}
		if !sameValue(got, m) {
			t.Errorf("decoded %+v, want %+v", got, m)
		}
	}
}

func TestGossipKeyResultLimit(t *testing.T) {
	m := &GossipKeyResult{Keys: make([]string, MaxGossipKeys+1)}
	if _, err := AppendFrame(nil, 1, m); !errors.Is(err, ErrBadRequest) {
		t.Fatalf("%d keys encoded: %v", len(m.Keys), err)
	}
	// A peer that sends more anyway is refused on decode.
	body, err := msgpack.Marshal([]any{"", make([]string, MaxGossipKeys+1)})
	if err != nil {
		t.Fatal(err)
	}
	if err := Decode(body, new(GossipKeyResult)); !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), "keys") {
		t.Fatalf("decoded %d keys: %v", MaxGossipKeys+1, err)
	}
}
