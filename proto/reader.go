package proto

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// readBufferSize is the size of the bufio.Reader NewReader wraps a
// stream in.
const readBufferSize = 64 << 10

// keepBuffer is the largest body buffer a Reader keeps between frames.
// A larger one, grown for one large frame, is dropped at the next call
// to Next, so a connection that sent one large frame and then idles does
// not pin up to maxFrame of memory.
const keepBuffer = 64 << 10

// Reader reads frames from a stream.
//
// The length of each frame is checked before anything is allocated for
// it: a length over maxFrame is refused with ErrFrameTooLarge, one too
// short to hold the header with ErrFrameTooShort. Neither can be
// recovered from (what follows is not known to be a frame), so the
// caller closes the connection.
//
// A length is only a claim: the body buffer grows with the bytes that
// have arrived (doubling from 512 bytes), never ahead of them, so a peer
// that announces a megabyte and sends a hundred bytes makes the Reader
// hold about a kilobyte, not the megabyte.
//
// The body Next returns aliases a buffer the Reader reuses: it is valid
// until the next call to Next, and so are the strings Decode takes from
// it. The buffer grows to the largest body seen, rounded up to a power
// of two, and never beyond maxFrame; one over 64 KiB is dropped at the
// next call to Next, so large frames allocate each time and an idle
// Reader holds at most 64 KiB of body buffer. A frame no larger than the
// buffer already holds allocates nothing.
//
// A frame of an unknown version (or with its reserved header bytes
// set, which a later version may give a meaning) is returned as its
// header and ErrUnsupportedVersion; its body is discarded, so the stream
// stays in sync and the server can answer it with an Error of
// CodeUnsupported. A frame of an unknown type is not an error here: Next
// returns it, and the server answers it the same way.
//
// A Reader is not safe for concurrent use.
type Reader struct {
	br       *bufio.Reader
	src      io.Reader // what br reads, for GrowBuffer; nil when the caller gave br
	maxFrame int
	hdr      [HeaderSize]byte // the length and header being read
	buf      []byte           // the body buffer, reused
}

// NewReader returns a Reader of frames from r whose length field (header
// and body) is at most maxFrame bytes; maxFrame <= 0 means
// DefaultMaxFrame. r is wrapped in a bufio.Reader of 64 KiB unless it
// already is a *bufio.Reader.
func NewReader(r io.Reader, maxFrame int) *Reader {
	return NewReaderSize(r, maxFrame, readBufferSize)
}

// NewReaderSize is NewReader with a read buffer of bufSize bytes (at
// least 16) instead of 64 KiB. A server reads a connection that has not
// authenticated with a small buffer and a small maxFrame, and lifts both
// (GrowBuffer, SetMaxFrame) once it has.
func NewReaderSize(r io.Reader, maxFrame, bufSize int) *Reader {
	if maxFrame <= 0 {
		maxFrame = DefaultMaxFrame
	}
	if br, ok := r.(*bufio.Reader); ok {
		return &Reader{br: br, maxFrame: maxFrame}
	}
	return &Reader{br: bufio.NewReaderSize(r, bufSize), src: r, maxFrame: maxFrame}
}

// SetMaxFrame changes the bound on the length field of the frames Next
// reads from now on; maxFrame <= 0 means DefaultMaxFrame.
func (r *Reader) SetMaxFrame(maxFrame int) {
	if maxFrame <= 0 {
		maxFrame = DefaultMaxFrame
	}
	r.maxFrame = maxFrame
}

// GrowBuffer replaces the read buffer with one of size bytes, keeping
// the bytes it holds, unless it is that large already or the Reader was
// given its *bufio.Reader (which it does not replace). It allocates; a
// server calls it once per connection, when the connection has
// authenticated.
func (r *Reader) GrowBuffer(size int) {
	if r.src == nil || size <= r.br.Size() {
		return
	}
	k := r.br.Buffered()
	if k == 0 {
		r.br = bufio.NewReaderSize(r.src, size)
		return
	}
	held, _ := r.br.Peek(k)
	r.br = bufio.NewReaderSize(io.MultiReader(bytes.NewReader(bytes.Clone(held)), r.src), size)
	// Take the held bytes back in now (the first reader gives them in
	// one read, without touching the stream), so Buffered stays exact.
	r.br.Peek(k)
}

// Next reads the next frame and returns its header and body. At the end
// of the stream between frames it returns io.EOF; inside a frame,
// io.ErrUnexpectedEOF. The body is valid until the next call to Next.
func (r *Reader) Next() (Header, []byte, error) {
	if cap(r.buf) > keepBuffer {
		r.buf = nil
	}
	if _, err := io.ReadFull(r.br, r.hdr[:4]); err != nil {
		return Header{}, nil, err
	}
	n := binary.BigEndian.Uint32(r.hdr[:4])
	if n < headerLen {
		return Header{}, nil, fmt.Errorf("%w: length %d, the header alone takes %d", ErrFrameTooShort, n, headerLen)
	}
	if uint64(n) > uint64(r.maxFrame) {
		return Header{}, nil, fmt.Errorf("%w: length %d, limit %d", ErrFrameTooLarge, n, r.maxFrame)
	}
	if _, err := io.ReadFull(r.br, r.hdr[4:]); err != nil {
		return Header{}, nil, unexpected(err)
	}
	h := Header{
		Version: r.hdr[4],
		Type:    Type(r.hdr[5]),
		ID:      binary.BigEndian.Uint64(r.hdr[8:]),
	}
	size := int(n) - headerLen
	if h.Version != Version || r.hdr[6] != 0 || r.hdr[7] != 0 {
		if _, err := r.br.Discard(size); err != nil {
			return h, nil, unexpected(err)
		}
		return h, nil, fmt.Errorf("%w: version %d, reserved bytes %#02x%02x", ErrUnsupportedVersion, h.Version, r.hdr[6], r.hdr[7])
	}
	if size <= cap(r.buf) {
		body := r.buf[:size]
		if _, err := io.ReadFull(r.br, body); err != nil {
			return h, nil, unexpected(err)
		}
		return h, body, nil
	}
	body, err := r.readGrowing(size)
	if err != nil {
		return h, nil, unexpected(err)
	}
	return h, body, nil
}

// readGrowing reads a body larger than the buffer, growing the buffer as
// bytes arrive: it doubles only when full, so it is never more than
// twice what has been read (or 512 bytes), whatever the length claimed.
func (r *Reader) readGrowing(size int) ([]byte, error) {
	buf := r.buf[:0]
	for len(buf) < size {
		if len(buf) == cap(buf) {
			grown := make([]byte, len(buf), bufferSize(min(size, 2*cap(buf)), r.maxFrame))
			copy(grown, buf)
			buf = grown
			r.buf = grown
		}
		k, err := r.br.Read(buf[len(buf):min(size, cap(buf))])
		buf = buf[:len(buf)+k]
		if err != nil && len(buf) < size {
			return nil, err
		}
	}
	return buf, nil
}

// Buffered returns the number of bytes read from the stream and not yet
// returned by Next. A server that answers pipelined requests can flush
// its writes only when it is 0, when no more requests are waiting.
func (r *Reader) Buffered() int { return r.br.Buffered() }

// bufferSize is the size of a body buffer that must hold size bytes: the
// next power of two, at most maxFrame.
func bufferSize(size, maxFrame int) int {
	c := 512
	for c < size {
		c <<= 1
	}
	return max(size, min(c, maxFrame))
}

// unexpected turns an io.EOF inside a frame into io.ErrUnexpectedEOF.
func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
