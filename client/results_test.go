package client

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/fcap-io/fcap/proto"
)

// fill sets every field of v reachable through structs and slices to a
// non-zero value (strings, numbers, bools, one element per slice), but
// uint16s.
func fill(v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		v.SetString("s-" + v.Type().Name())
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(1)
	case reflect.Uint, reflect.Uint8, reflect.Uint32, reflect.Uint64:
		v.SetUint(1)
	case reflect.Uint16:
		// Left 0: a Topology's owners index its members.
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(v.Index(0))
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i))
			}
		}
	}
}

// TestCallResults walks the call's answers: every request an ad server
// may send has a place for its answer, and deliver decodes each answer
// there, detached from the body the reader reuses, with its epoch
// readable.
func TestCallResults(t *testing.T) {
	for i := range 256 {
		req := proto.Type(i)
		if req.Senders()&proto.SenderAdServer != 0 && results[req.Answer()] == nil {
			t.Errorf("%s: the call has no place for its answer %s", req, req.Answer())
		}
	}
	for i, slot := range results {
		if slot == nil {
			continue
		}
		typ := proto.Type(i)
		t.Run(typ.String(), func(t *testing.T) {
			cl := getCall(typ)
			if m := slot(cl); m.Type() != typ {
				t.Fatalf("the place of %s holds a %s", typ, m.Type())
			}
			sent := proto.NewMessage(typ)
			fill(reflect.ValueOf(sent).Elem())
			frame, err := proto.AppendFrame(nil, 1, sent)
			if err != nil {
				t.Fatal(err)
			}
			cl.deliver(proto.Header{Type: typ, ID: 1}, frame[proto.HeaderSize:])
			<-cl.done
			if cl.err != nil {
				t.Fatal(cl.err)
			}
			// The reader reuses its buffer for the next frame.
			copy(frame, bytes.Repeat([]byte{0xc1}, len(frame)))
			if got := slot(cl); !reflect.DeepEqual(got, sent) {
				t.Errorf("after the body was reused: %+v, sent %+v", got, sent)
			}
			if e, ok := proto.EpochOf(sent); ok && epochOf(cl) != e {
				t.Errorf("epochOf = %d, want %d", epochOf(cl), e)
			}
		})
	}
}
