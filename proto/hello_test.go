package proto

import (
	"bytes"
	"errors"
	"testing"
)

func TestHelloRoundTrip(t *testing.T) {
	for _, m := range []Message{&Hello{}, &Hello{Token: "secret-token-0123"}, &HelloResult{}, &HelloResult{Role: "adserver"}} {
		h, body := frameOf(t, 3, m)
		got := NewMessage(h.Type)
		if err := Decode(body, got); err != nil {
			t.Fatalf("%T: %v", m, err)
		}
		if !sameValue(got, m) {
			t.Errorf("decoded %+v, want %+v", got, m)
		}
	}
}

// rw answers whatever is written with a canned stream.
type rw struct {
	bytes.Buffer
	answer *bytes.Reader
}

func (c *rw) Read(p []byte) (int, error) { return c.answer.Read(p) }

func TestSayHello(t *testing.T) {
	frame := func(m Message) *bytes.Reader {
		b, err := AppendFrame(nil, 0, m)
		if err != nil {
			t.Fatal(err)
		}
		return bytes.NewReader(b)
	}
	c := &rw{answer: frame(&HelloResult{Role: "operator"})}
	if role, err := SayHello(c, "tok"); err != nil || role != "operator" {
		t.Errorf("accepted: %q, %v", role, err)
	}
	if _, body := frameOf(t, 0, &Hello{Token: "tok"}); !bytes.HasSuffix(c.Bytes(), body) {
		t.Error("the Hello sent does not carry the token")
	}
	c = &rw{answer: frame(&Error{Code: CodeUnauthenticated})}
	if _, err := SayHello(c, "tok"); !errors.Is(err, ErrUnauthenticated) {
		t.Errorf("refused: %v", err)
	}
	c = &rw{answer: frame(&Error{Code: CodeUnsupported, Message: "unknown message type"})}
	if _, err := SayHello(c, "tok"); !errors.Is(err, ErrUnsupported) {
		t.Errorf("old node: %v", err)
	}
}
