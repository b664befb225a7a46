package proto

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/fcap-io/fcap"
)

var sentinels = map[Code]error{
	CodeBadRequest:         ErrBadRequest,
	CodeNotOwner:           ErrNotOwner,
	CodeOverloaded:         ErrOverloaded,
	CodeShuttingDown:       ErrShuttingDown,
	CodeInternal:           ErrInternal,
	CodeCapacity:           ErrCapacity,
	CodeUnknownReservation: ErrUnknownReservation,
	CodeUnsupported:        ErrUnsupported,
}

// TestErrorIsAcrossTheWire sends an Error of every code through a frame
// and checks that errors.Is matches its sentinel and no other.
func TestErrorIsAcrossTheWire(t *testing.T) {
	for code, sentinel := range sentinels {
		_, body := frameOf(t, 1, NewError(fmt.Errorf("wrapped: %w", sentinel), 99))
		var m Error
		if err := Decode(body, &m); err != nil {
			t.Fatal(err)
		}
		var err error = &m
		if m.Code != code || m.Epoch != 99 {
			t.Fatalf("%v: decoded %+v", code, m)
		}
		for other, s := range sentinels {
			if got := errors.Is(err, s); got != (other == code) {
				t.Errorf("errors.Is(%v error, %v) = %v", code, s, got)
			}
		}
		if errors.Unwrap(err) != sentinel {
			t.Errorf("%v: Unwrap = %v", code, errors.Unwrap(err))
		}
		var pe *Error
		if !errors.As(fmt.Errorf("call: %w", err), &pe) || pe.Code != code {
			t.Errorf("%v: errors.As through a wrap failed", code)
		}
		if CodeOf(fmt.Errorf("client: %w", err)) != code {
			t.Errorf("%v: CodeOf of the decoded error = %v", code, CodeOf(err))
		}
	}
	unknown := &Error{Code: 999}
	for _, s := range sentinels {
		if errors.Is(unknown, s) {
			t.Errorf("an unknown code matches %v", s)
		}
	}
	if unknown.Unwrap() != nil {
		t.Errorf("unknown code unwraps to %v", unknown.Unwrap())
	}
}

func TestErrorString(t *testing.T) {
	cases := []struct {
		err  *Error
		want string
	}{
		{&Error{Code: CodeNotOwner, Epoch: 1234, Message: "viewer v moved"}, "fcap: not owner (epoch 00000000000004d2): viewer v moved"},
		{&Error{Code: CodeNotOwner, Epoch: 1234}, "fcap: not owner (epoch 00000000000004d2)"},
		{&Error{Code: CodeOverloaded}, "fcap: overloaded"},
		{&Error{Code: CodeBadRequest, Message: "cap 2: invalid request: empty cap id"}, "fcap: bad request: cap 2: invalid request: empty cap id"},
		{&Error{Code: 77, Message: "?"}, "fcap: error code(77): ?"},
	}
	for _, c := range cases {
		if got := c.err.Error(); got != c.want {
			t.Errorf("Error() = %q, want %q", got, c.want)
		}
	}
}

func TestCodeOf(t *testing.T) {
	cases := []struct {
		err  error
		want Code
	}{
		{nil, 0},
		{fcap.ErrInvalid, CodeBadRequest},
		{fcap.ErrEmptyViewer, CodeBadRequest},
		{fcap.ErrBadLimit, CodeBadRequest},
		{fcap.ErrUnknownScope, CodeBadRequest},
		{fcap.ErrZeroReservationID, CodeBadRequest},
		{fmt.Errorf("cap 3: %w", fcap.ErrBadWindow), CodeBadRequest},
		{ErrBadRequest, CodeBadRequest},
		{fmt.Errorf("decoding: %w", ErrBadRequest), CodeBadRequest},
		{ErrFrameTooLarge, CodeBadRequest},
		{ErrFrameTooShort, CodeBadRequest},
		{fcap.ErrMemoryLimit, CodeCapacity},
		{fcap.ErrTooManyKeys, CodeCapacity},
		{fmt.Errorf("reserve: %w", fcap.ErrTooManyReservations), CodeCapacity},
		{ErrCapacity, CodeCapacity},
		{fcap.ErrUnknownReservation, CodeUnknownReservation},
		{ErrUnknownReservation, CodeUnknownReservation},
		{ErrNotOwner, CodeNotOwner},
		{fmt.Errorf("route: %w", ErrNotOwner), CodeNotOwner},
		{ErrOverloaded, CodeOverloaded},
		{ErrShuttingDown, CodeShuttingDown},
		{ErrInternal, CodeInternal},
		{ErrUnsupported, CodeUnsupported},
		{ErrUnsupportedVersion, CodeUnsupported},
		{&Error{Code: CodeNotOwner}, CodeNotOwner},
		{fmt.Errorf("peer: %w", &Error{Code: CodeOverloaded}), CodeOverloaded},
		{&Error{Code: 500}, 500},
		{io.EOF, CodeInternal},
		{errors.New("disk on fire"), CodeInternal},
	}
	for _, c := range cases {
		if got := CodeOf(c.err); got != c.want {
			t.Errorf("CodeOf(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

func TestNewError(t *testing.T) {
	err := fmt.Errorf("candidate 3: %w", fcap.ErrNoCaps)
	if e := NewError(err, 5); e.Code != CodeBadRequest || e.Epoch != 5 || e.Message != err.Error() {
		t.Fatalf("NewError(%v) = %+v", err, e)
	}
	if e := NewError(ErrNotOwner, 8); e.Code != CodeNotOwner || e.Message != "" || e.Error() != "fcap: not owner (epoch 0000000000000008)" {
		t.Fatalf("NewError(ErrNotOwner) = %+v, %q", e, e.Error())
	}
	peer := &Error{Code: CodeOverloaded, Message: "queue full", Epoch: 3}
	if e := NewError(peer, 4); e.Code != CodeOverloaded || e.Message != "queue full" || e.Epoch != 4 {
		t.Fatalf("NewError(peer error) = %+v", e)
	}
	long := errors.New(strings.Repeat("é", 1000)) // 2000 bytes
	e := NewError(long, 0)
	if len(e.Message) > maxErrorMessage || len(e.Message) < maxErrorMessage-3 || !utf8.ValidString(e.Message) {
		t.Fatalf("NewError of a %d-byte message: %d bytes, valid UTF-8 %v", len(long.Error()), len(e.Message), utf8.ValidString(e.Message))
	}
	if e := NewError(nil, 1); e.Code != 0 || e.Message != "" {
		t.Fatalf("NewError(nil) = %+v", e)
	}
}

func TestCodeString(t *testing.T) {
	for code := range sentinels {
		if s := code.String(); strings.HasPrefix(s, "code(") || strings.Contains(s, " ") {
			t.Errorf("Code(%d).String() = %q", code, s)
		}
		if code.Sentinel() != sentinels[code] {
			t.Errorf("Code(%d).Sentinel() = %v", code, code.Sentinel())
		}
	}
	if s := Code(0).String(); s != "code(0)" {
		t.Errorf("Code(0).String() = %q", s)
	}
	if CodeNotOwner.String() != "not_owner" {
		t.Errorf("CodeNotOwner.String() = %q", CodeNotOwner.String())
	}
}

// TestSentinelsAreTheirFcapKinds: where the vocabulary has an error for
// what a code says, the code's sentinel, and so an answer of that code
// decoded from the wire, is that error too; every other sentinel is none
// of them. The sentinels keep their own text.
func TestSentinelsAreTheirFcapKinds(t *testing.T) {
	kinds := []error{fcap.ErrInvalid, fcap.ErrUnknownReservation, fcap.ErrFutureTime}
	is := map[Code][]error{
		CodeBadRequest:         {fcap.ErrInvalid},
		CodeUnknownReservation: {fcap.ErrUnknownReservation},
		CodeFutureTime:         {fcap.ErrInvalid, fcap.ErrFutureTime},
	}
	texts := map[Code]string{
		CodeBadRequest:         "fcap: bad request",
		CodeUnknownReservation: "fcap: unknown reservation",
		CodeFutureTime:         "fcap: bad request: time ahead of the node's clock",
	}
	for c := range Code(len(codeInfo)) {
		s := c.Sentinel()
		if s == nil {
			continue
		}
		_, body := frameOf(t, 1, &Error{Code: c, Message: "m"})
		var m Error
		if err := Decode(body, &m); err != nil {
			t.Fatal(err)
		}
		wire := fmt.Errorf("call: %w", &m)
		for _, k := range kinds {
			want := slices.Contains(is[c], k)
			if got := errors.Is(s, k); got != want {
				t.Errorf("errors.Is(%v, %v) = %v, want %v", s, k, got, want)
			}
			if got := errors.Is(wire, k); got != want {
				t.Errorf("errors.Is(%v, %v) from the wire = %v, want %v", wire, k, got, want)
			}
		}
		if txt, ok := texts[c]; ok && s.Error() != txt {
			t.Errorf("%v: text %q, want %q", c, s.Error(), txt)
		}
	}
}
