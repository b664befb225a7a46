package proto

import (
	"errors"
	"fmt"
	"testing"

	"github.com/fcap-io/fcap"
)

// TestFutureTimeCrossesTheWire: the engine's refusal of a time ahead of
// the node's clock reaches the client as ErrFutureTime, which is also a
// bad request (the client returns it instead of failing open).
func TestFutureTimeCrossesTheWire(t *testing.T) {
	refusal := fmt.Errorf("check: %w: 315360000000 ticks ahead", fcap.ErrFutureTime)
	if c := CodeOf(refusal); c != CodeFutureTime {
		t.Fatalf("CodeOf(fcap.ErrFutureTime) = %v, want future_time", c)
	}
	if c := CodeOf(fmt.Errorf("api: %w", ErrFutureTime)); c != CodeFutureTime {
		t.Fatalf("CodeOf(ErrFutureTime) = %v, want future_time", c)
	}
	_, body := frameOf(t, 1, NewError(refusal, 7))
	var m Error
	if err := Decode(body, &m); err != nil {
		t.Fatal(err)
	}
	var err error = fmt.Errorf("call: %w", &m)
	if !errors.Is(err, ErrFutureTime) || !errors.Is(err, ErrBadRequest) {
		t.Fatalf("%v: errors.Is ErrFutureTime %v, ErrBadRequest %v; want both", err, errors.Is(err, ErrFutureTime), errors.Is(err, ErrBadRequest))
	}
	// One check of the engine's sentinel holds on either side of the wire.
	if !errors.Is(err, fcap.ErrFutureTime) || !errors.Is(err, fcap.ErrInvalid) {
		t.Fatalf("%v: errors.Is fcap.ErrFutureTime %v, fcap.ErrInvalid %v; want both", err, errors.Is(err, fcap.ErrFutureTime), errors.Is(err, fcap.ErrInvalid))
	}
	if errors.Is(err, ErrOverloaded) || errors.Is(err, ErrInternal) {
		t.Fatalf("%v matches an unrelated sentinel", err)
	}
	if m.Code.String() != "future_time" {
		t.Fatalf("code name %q", m.Code.String())
	}
	if CodeOf(err) != CodeFutureTime {
		t.Fatalf("CodeOf of the decoded error = %v", CodeOf(err))
	}
	// A plain bad request is not a future time.
	if errors.Is(&Error{Code: CodeBadRequest}, ErrFutureTime) || errors.Is(&Error{Code: CodeBadRequest}, fcap.ErrFutureTime) {
		t.Fatal("a bad request matches ErrFutureTime")
	}
}
