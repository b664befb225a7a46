package proto

import (
	"errors"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

func TestVerifySlices(t *testing.T) {
	// Every key is in exactly one slice.
	for key := uint64(0); key < 2000; key += 7 {
		n := 0
		for s := range uint32(5) {
			if (&Verify{Slices: 5, Slice: s}).InSlice(key, 271) {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("key %d is in %d of 5 slices", key, n)
		}
		if !(&Verify{}).InSlice(key, 271) || !(&Verify{Slices: 1}).InSlice(key, 271) {
			t.Fatalf("key %d is not in the only slice", key)
		}
	}
	if _, err := AppendFrame(nil, 1, &Verify{Slices: 3, Slice: 3}); !errors.Is(err, ErrBadRequest) {
		t.Fatalf("encoding slice 3 of 3: %v, want ErrBadRequest", err)
	}
	body, err := msgpack.Marshal([]any{1, []byte{}, true, false, 3, 3})
	if err != nil {
		t.Fatal(err)
	}
	if err := Decode(body, &Verify{}); !errors.Is(err, ErrBadRequest) {
		t.Fatalf("decoding slice 3 of 3: %v, want ErrBadRequest", err)
	}
}
