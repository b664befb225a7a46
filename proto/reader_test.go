package proto

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"
	"testing/iotest"
)

// frames returns the frames of every test case, concatenated, with the
// case of each.
func frames(t testing.TB) ([]byte, []testCase) {
	t.Helper()
	var buf []byte
	var err error
	cases := testCases()
	for i, c := range cases {
		if buf, err = AppendFrame(buf, uint64(i)+1, c.msg); err != nil {
			t.Fatal(err)
		}
	}
	return buf, cases
}

// rawFrame builds a frame by hand.
func rawFrame(length uint32, version, typ byte, reserved uint16, id uint64, body []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, length)
	b = append(b, version, typ)
	b = binary.BigEndian.AppendUint16(b, reserved)
	b = binary.BigEndian.AppendUint64(b, id)
	return append(b, body...)
}

// readAll reads every frame of r and checks them against cases.
func readAll(t *testing.T, r *Reader, cases []testCase) {
	t.Helper()
	for i, c := range cases {
		h, body, err := r.Next()
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if h.ID != uint64(i)+1 || h.Type != c.msg.Type() || h.Version != Version {
			t.Fatalf("frame %d: header %+v", i, h)
		}
		m := NewMessage(h.Type)
		if err := Decode(body, m); err != nil || !sameValue(m, c.expected()) {
			t.Fatalf("frame %d (%s): %v %+v", i, c.name, err, m)
		}
	}
	if _, _, err := r.Next(); err != io.EOF {
		t.Fatalf("at the end: %v, want io.EOF", err)
	}
}

func TestReaderSmallReads(t *testing.T) {
	stream, cases := frames(t)
	for name, r := range map[string]io.Reader{
		"one byte":      iotest.OneByteReader(bytes.NewReader(stream)),
		"half":          iotest.HalfReader(bytes.NewReader(stream)),
		"eof with data": iotest.DataErrReader(bytes.NewReader(stream)),
		"whole":         bytes.NewReader(stream),
		"small bufio":   bufio.NewReaderSize(iotest.OneByteReader(bytes.NewReader(stream)), 16),
	} {
		t.Run(name, func(t *testing.T) {
			readAll(t, NewReader(r, DefaultMaxFrame), cases)
		})
	}
}

// strictReader serves data and fails the test if it is read past it: a
// reader must decide on a frame's length without reading its body.
type strictReader struct {
	t    *testing.T
	data []byte
}

func (s *strictReader) Read(p []byte) (int, error) {
	if len(s.data) == 0 {
		s.t.Errorf("read past the %d bytes the reader needed", HeaderSize)
		return 0, io.ErrUnexpectedEOF
	}
	n := copy(p, s.data)
	s.data = s.data[n:]
	return n, nil
}

func TestReaderRefusesLength(t *testing.T) {
	cases := []struct {
		name   string
		length uint32
		max    int
		want   error
	}{
		{"over the default", DefaultMaxFrame + 1, 0, ErrFrameTooLarge},
		{"4 GiB", 0xFFFFFFFF, DefaultMaxFrame, ErrFrameTooLarge},
		{"over a small max", 101, 100, ErrFrameTooLarge},
		{"empty", 0, 100, ErrFrameTooShort},
		{"header cut", headerLen - 1, 100, ErrFrameTooShort},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := &strictReader{t: t, data: rawFrame(c.length, Version, byte(TypePing), 0, 1, nil)[:HeaderSize]}
			r := NewReader(src, c.max)
			_, _, err := r.Next()
			if !errors.Is(err, c.want) {
				t.Fatalf("Next: %v, want %v", err, c.want)
			}
			if cap(r.buf) != 0 {
				t.Fatalf("allocated a %d-byte buffer for a refused frame", cap(r.buf))
			}
		})
	}
}

func TestReaderMaxFrame(t *testing.T) {
	const max = 100
	body := bytes.Repeat([]byte{0xc0}, max-headerLen)
	stream := rawFrame(max, Version, byte(TypePing), 0, 7, body)
	r := NewReader(bytes.NewReader(stream), max)
	h, got, err := r.Next()
	if err != nil || h.ID != 7 || !bytes.Equal(got, body) {
		t.Fatalf("frame of exactly maxFrame: %+v, %d bytes, %v", h, len(got), err)
	}
	if cap(r.buf) > max {
		t.Fatalf("buffer of %d bytes, over maxFrame %d", cap(r.buf), max)
	}
}

// TestReaderBufferReuse checks that the body buffer is reused: a frame no
// larger than one seen before allocates nothing.
func TestReaderBufferReuse(t *testing.T) {
	big, err := AppendFrame(nil, 1, &Pong{Name: string(make([]byte, 5000))})
	if err != nil {
		t.Fatal(err)
	}
	small, err := AppendFrame(nil, 2, &Pong{Name: "n"})
	if err != nil {
		t.Fatal(err)
	}
	stream := append(append([]byte{}, big...), bytes.Repeat(append(small, big...), 100)...)
	r := NewReader(bytes.NewReader(stream), 0)
	if _, _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(99, func() {
		for range 2 {
			if _, _, err := r.Next(); err != nil {
				t.Fatal(err)
			}
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per pair of frames", allocs)
	}
	if c := cap(r.buf); c < 5000 || c > 2*5000+512 {
		t.Fatalf("buffer of %d bytes for frames of at most %d", c, len(big))
	}
}

func TestReaderUnsupportedVersion(t *testing.T) {
	ping, _ := AppendFrame(nil, 1, &Ping{})
	pong, _ := AppendFrame(nil, 3, &Pong{Name: "after"})
	stream := append([]byte{}, ping...)
	stream = append(stream, rawFrame(headerLen+5, Version+1, byte(TypePing), 0, 2, []byte("abcde"))...)
	stream = append(stream, rawFrame(headerLen+3, Version, byte(TypePing), 1, 4, []byte("xyz"))...)
	stream = append(stream, pong...)
	r := NewReader(iotest.OneByteReader(bytes.NewReader(stream)), 0)
	if h, _, err := r.Next(); err != nil || h.ID != 1 {
		t.Fatalf("first frame: %+v %v", h, err)
	}
	h, body, err := r.Next()
	if !errors.Is(err, ErrUnsupportedVersion) || h.Version != Version+1 || h.ID != 2 || body != nil {
		t.Fatalf("version %d frame: %+v %q %v", Version+1, h, body, err)
	}
	if CodeOf(err) != CodeUnsupported {
		t.Fatalf("CodeOf(%v) = %v", err, CodeOf(err))
	}
	h, _, err = r.Next()
	if !errors.Is(err, ErrUnsupportedVersion) || h.ID != 4 {
		t.Fatalf("frame with reserved bytes set: %+v %v", h, err)
	}
	h, body, err = r.Next()
	var m Pong
	if err != nil || h.ID != 3 || Decode(body, &m) != nil || m.Name != "after" {
		t.Fatalf("frame after them: %+v %v %+v: out of sync", h, err, m)
	}
}

func TestReaderUnknownType(t *testing.T) {
	stream := rawFrame(headerLen+1, Version, 200, 0, 9, []byte{0x90})
	h, body, err := NewReader(bytes.NewReader(stream), 0).Next()
	if err != nil || h.Type != 200 || !bytes.Equal(body, []byte{0x90}) {
		t.Fatalf("frame of unknown type: %+v %q %v", h, body, err)
	}
}

func TestReaderTruncated(t *testing.T) {
	frame, _ := AppendFrame(nil, 1, &Pong{Name: "node"})
	for n := 1; n < len(frame); n++ {
		r := NewReader(bytes.NewReader(frame[:n]), 0)
		if _, _, err := r.Next(); err != io.ErrUnexpectedEOF {
			t.Fatalf("frame cut at %d of %d bytes: %v, want io.ErrUnexpectedEOF", n, len(frame), err)
		}
	}
	// A frame of another version cut in its body.
	cut := rawFrame(headerLen+10, 9, 1, 0, 1, []byte("abc"))
	if _, _, err := NewReader(bytes.NewReader(cut), 0).Next(); err != io.ErrUnexpectedEOF {
		t.Fatalf("version 9 frame cut in its body: %v", err)
	}
	if _, _, err := NewReader(bytes.NewReader(nil), 0).Next(); err != io.EOF {
		t.Fatalf("empty stream: %v, want io.EOF", err)
	}
	failing := iotest.ErrReader(errors.New("boom"))
	if _, _, err := NewReader(failing, 0).Next(); err == nil || err.Error() != "boom" {
		t.Fatalf("failing stream: %v", err)
	}
}

func TestReaderBuffered(t *testing.T) {
	a, _ := AppendFrame(nil, 1, &Ping{})
	b, _ := AppendFrame(nil, 2, &Pong{Name: "b"})
	c, _ := AppendFrame(nil, 3, &Pong{Name: "c"})
	stream := append(append(append([]byte{}, a...), b...), c...)
	r := NewReader(bytes.NewReader(stream), 0)
	if r.Buffered() != 0 {
		t.Fatalf("Buffered before reading: %d", r.Buffered())
	}
	for i, want := range []int{len(b) + len(c), len(c), 0} {
		if _, _, err := r.Next(); err != nil {
			t.Fatal(err)
		}
		if got := r.Buffered(); got != want {
			t.Fatalf("after frame %d: Buffered %d, want %d", i, got, want)
		}
	}
}

func TestNewReaderKeepsBufio(t *testing.T) {
	br := bufio.NewReaderSize(bytes.NewReader(nil), 32)
	if r := NewReader(br, 0); r.br != br || r.maxFrame != DefaultMaxFrame {
		t.Fatalf("NewReader wrapped a *bufio.Reader again (or lost maxFrame): %+v", r)
	}
	if r := NewReader(bytes.NewReader(nil), 0); r.br.Size() != readBufferSize {
		t.Fatalf("bufio.Reader of %d bytes, want %d", r.br.Size(), readBufferSize)
	}
}

// TestReaderBodyGrowsWithArrival checks that a claimed length allocates
// nothing ahead of the bytes that arrive: a frame announcing a megabyte
// and cut off after a hundred bytes leaves a buffer of 512 bytes, and a
// large body that arrives a few bytes at a time is read whole.
func TestReaderBodyGrowsWithArrival(t *testing.T) {
	cut := rawFrame(DefaultMaxFrame, Version, byte(TypeCheck), 0, 1, make([]byte, 100))
	r := NewReader(bytes.NewReader(cut), 0)
	if _, _, err := r.Next(); err != io.ErrUnexpectedEOF {
		t.Fatalf("a frame cut after 100 bytes of body: %v, want io.ErrUnexpectedEOF", err)
	}
	if c := cap(r.buf); c > 512 {
		t.Fatalf("100 bytes of a 1 MiB frame arrived and the Reader holds a %d-byte buffer", c)
	}

	body := make([]byte, 300_000)
	for i := range body {
		body[i] = byte(i * 7)
	}
	stream := rawFrame(uint32(headerLen+len(body)), Version, byte(TypePing), 0, 2, body)
	r = NewReader(iotest.HalfReader(bytes.NewReader(stream)), 0)
	h, got, err := r.Next()
	if err != nil || h.ID != 2 || !bytes.Equal(got, body) {
		t.Fatalf("a 300 KB body read in pieces: %+v, %d bytes, %v", h, len(got), err)
	}
	if c := cap(r.buf); c != 512<<10 {
		t.Fatalf("buffer of %d bytes for a 300 KB body, want the next power of two", c)
	}
}

// TestReaderLimits checks what a server does with a connection that
// authenticates: it starts with a small buffer and frame limit and lifts
// both without losing a byte it had buffered.
func TestReaderLimits(t *testing.T) {
	small, _ := AppendFrame(nil, 1, &Ping{})
	big, _ := AppendFrame(nil, 2, &Pong{Name: string(make([]byte, 5000))})
	stream := append(append(append([]byte{}, small...), big...), small...)
	r := NewReaderSize(bytes.NewReader(stream), 1024, 64)
	if r.br.Size() != 64 {
		t.Fatalf("read buffer of %d bytes, want 64", r.br.Size())
	}
	if h, _, err := r.Next(); err != nil || h.ID != 1 {
		t.Fatalf("first frame: %+v %v", h, err)
	}
	held := r.Buffered()
	r.SetMaxFrame(0)
	r.GrowBuffer(4096)
	if r.br.Size() != 4096 || r.Buffered() != held {
		t.Fatalf("after GrowBuffer: buffer of %d bytes holding %d, want 4096 holding %d", r.br.Size(), r.Buffered(), held)
	}
	var m Pong
	if h, body, err := r.Next(); err != nil || h.ID != 2 || Decode(body, &m) != nil || len(m.Name) != 5000 {
		t.Fatalf("frame over the first limit, after SetMaxFrame: %+v %v", h, err)
	}
	if h, _, err := r.Next(); err != nil || h.ID != 1 {
		t.Fatalf("last frame: %+v %v", h, err)
	}

	r = NewReaderSize(bytes.NewReader(big), 1024, 64)
	if _, _, err := r.Next(); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("a 5 KB frame under a 1 KiB limit: %v, want ErrFrameTooLarge", err)
	}
	br := bufio.NewReaderSize(bytes.NewReader(nil), 32)
	r = NewReaderSize(br, 0, 64)
	r.GrowBuffer(4096)
	if r.br != br {
		t.Fatal("GrowBuffer replaced a *bufio.Reader the caller gave")
	}
}
