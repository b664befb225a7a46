package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// A record on disk is
//
//	length  uint32, little endian: bytes of payload, at least 1
//	crc     uint32, little endian: CRC-32C (Castagnoli) of the payload
//	payload length bytes
//
// Segments and snapshots are sequences of records. A record that is cut
// short or fails its checksum ends what can be trusted of its file.

const headerSize = 8

// MaxRecord is the largest payload a record may carry. A length prefix
// past it is corruption, never an allocation.
const MaxRecord = 256 << 20

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Errors a decoder reports. Both mean the bytes from here on are not
// trusted; ErrTorn says they end before the record does (a write cut
// short by a crash), ErrCorrupt that they are wrong.
var (
	ErrTorn    = errors.New("wal: torn record")
	ErrCorrupt = errors.New("wal: corrupt record")
)

// beginRecord appends room for a record header to dst and returns where
// the record starts.
func beginRecord(dst []byte) ([]byte, int) {
	return append(dst, 0, 0, 0, 0, 0, 0, 0, 0), len(dst)
}

// endRecord fills in the header of the record that starts at start and
// whose payload runs to the end of b.
func endRecord(b []byte, start int) {
	payload := b[start+headerSize:]
	binary.LittleEndian.PutUint32(b[start:], uint32(len(payload)))
	binary.LittleEndian.PutUint32(b[start+4:], crc32.Checksum(payload, castagnoli))
}

// AppendRecord appends payload to dst as one record.
func AppendRecord(dst, payload []byte) []byte {
	dst, start := beginRecord(dst)
	dst = append(dst, payload...)
	endRecord(dst, start)
	return dst
}

// DecodeRecord reads the record at the start of b: its payload (aliasing
// b) and the bytes it spans. It never panics and never allocates.
func DecodeRecord(b []byte) (payload []byte, n int, err error) {
	if len(b) < headerSize {
		return nil, 0, fmt.Errorf("%w: %d header bytes", ErrTorn, len(b))
	}
	size := binary.LittleEndian.Uint32(b)
	if size == 0 || size > MaxRecord {
		return nil, 0, fmt.Errorf("%w: length %d", ErrCorrupt, size)
	}
	if uint64(len(b)-headerSize) < uint64(size) {
		return nil, 0, fmt.Errorf("%w: %d of %d payload bytes", ErrTorn, len(b)-headerSize, size)
	}
	payload = b[headerSize : headerSize+int(size)]
	if crc32.Checksum(payload, castagnoli) != binary.LittleEndian.Uint32(b[4:]) {
		return nil, 0, fmt.Errorf("%w: checksum mismatch", ErrCorrupt)
	}
	return payload, headerSize + int(size), nil
}

// Scan calls fn with every record's payload in b, in order, until the
// end of b or the first record that does not decode. It returns the
// bytes of good records and the error that stopped it (nil at a clean
// end).
func Scan(b []byte, fn func(payload []byte)) (good int, err error) {
	for good < len(b) {
		p, n, err := DecodeRecord(b[good:])
		if err != nil {
			return good, err
		}
		fn(p)
		good += n
	}
	return good, nil
}
