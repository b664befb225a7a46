package proto

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strings"
	"testing"
)

var updateCorpus = flag.Bool("update-corpus", false, "rewrite the seed corpus under testdata/fuzz")

// fuzzMaxFrame is FuzzReader's maxFrame, small so that the fuzzer meets
// the limit often. Seeds are kept under it.
const fuzzMaxFrame = 8 << 10

// seeds returns the seed inputs of the fuzz targets: for FuzzDecode a
// type byte and a body, for FuzzReader a frame; named after the test
// case. Cases whose frame is over fuzzMaxFrame are left out.
func seeds(t testing.TB) (decode, reader map[string][]byte) {
	decode, reader = map[string][]byte{}, map[string][]byte{}
	var all []byte
	for _, c := range testCases() {
		frame, err := AppendFrame(nil, 1, c.msg)
		if err != nil {
			t.Fatal(err)
		}
		if len(frame) > fuzzMaxFrame {
			continue
		}
		name := "seed-" + strings.ReplaceAll(c.name, "/", "-")
		decode[name] = append([]byte{byte(c.msg.Type())}, frame[HeaderSize:]...)
		reader[name] = frame
		if len(all)+len(frame) <= fuzzMaxFrame {
			all = append(all, frame...)
		}
	}
	// A few broken inputs, so the fuzzer starts from the edges as well as
	// from valid encodings: every known type's body cut short, one with a
	// wrong msgpack type, one with bytes after it, and frames cut inside
	// the header and inside the body.
	for _, c := range []string{"check", "allow", "record", "replicate", "topology", "status", "sync-request", "drain", "error"} {
		body := decode["seed-"+c]
		decode["bad-"+c+"-truncated"] = body[:len(body)/2]
	}
	decode["bad-check-wrong-type"] = append([]byte{byte(TypeCheck)}, 0x94, 0xa1, 'v', 0xc3, 0xc3, 0xc3)
	decode["bad-ping-trailing"] = append([]byte{byte(TypePing)}, 0x90, 0x00)
	decode["bad-replicate-huge-bin"] = append([]byte{byte(TypeReplicate)}, 0x96, 0xa1, 'n', 0x01, 0x01, 0xc6, 0xff, 0xff, 0xff, 0xff)
	reader["bad-truncated-header"] = reader["seed-check"][:HeaderSize-3]
	reader["bad-truncated-body"] = reader["seed-check"][:len(reader["seed-check"])-5]
	reader["bad-too-short"] = rawFrame(headerLen-1, Version, byte(TypePing), 0, 1, nil)
	reader["bad-4gib"] = rawFrame(0xFFFFFFFF, Version, byte(TypeCheck), 0, 1, nil)
	reader["seed-stream"] = all
	reader["seed-too-large"] = rawFrame(fuzzMaxFrame+1, Version, byte(TypePing), 0, 1, nil)[:HeaderSize]
	reader["seed-other-version"] = append(rawFrame(headerLen+1, 2, byte(TypePing), 0, 1, []byte{0x90}), reader["seed-ping"]...)
	return decode, reader
}

// corpusFile is the content of a seed file in the fuzz corpus format.
func corpusFile(b []byte) []byte {
	return fmt.Appendf(nil, "go test fuzz v1\n[]byte(%q)\n", b)
}

// TestSeedCorpus checks that the seed corpus checked in under
// testdata/fuzz is the one the test cases give (go test -run
// TestSeedCorpus -update-corpus rewrites it).
func TestSeedCorpus(t *testing.T) {
	decode, reader := seeds(t)
	for target, inputs := range map[string]map[string][]byte{"FuzzDecode": decode, "FuzzReader": reader} {
		dir := filepath.Join("testdata", "fuzz", target)
		if *updateCorpus {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		for name, input := range inputs {
			path := filepath.Join(dir, name)
			want := corpusFile(input)
			if *updateCorpus {
				if err := os.WriteFile(path, want, 0o644); err != nil {
					t.Fatal(err)
				}
				continue
			}
			got, err := os.ReadFile(path)
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("%s is missing or stale (%v): go test ./proto -run TestSeedCorpus -update-corpus", path, err)
			}
		}
	}
}

// allocSlack is what checkAllocated adds to every limit.
const allocSlack = 64 << 10

// checkAllocated fails t if f allocates more than limit bytes. It
// first measures with runtime/metrics, which, unlike
// runtime.ReadMemStats, does not stop the world: a large allocation
// (one sized by a length a frame claims) counts at once and exactly, but
// small ones count when their span leaves a cache, so the figure can be
// off by a span either way. Only when that says f is over the limit does
// it run f again under runtime.ReadMemStats, which is exact and slow. f
// must do the same work each time it runs.
//
// Either way the count is the process's, and a fuzz worker's own
// goroutines allocate now and then: slack is added to every limit. It
// is far below what an allocation sized by a claimed length (up to 4
// GiB) would take.
func checkAllocated(t *testing.T, limit uint64, what string, f func()) {
	t.Helper()
	limit += allocSlack
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	before := s[0].Value.Uint64()
	f()
	metrics.Read(s)
	if s[0].Value.Uint64()-before <= limit {
		return
	}
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	f()
	runtime.ReadMemStats(&m1)
	if n := m1.TotalAlloc - m0.TotalAlloc; n > limit {
		t.Fatalf("%s allocated %d bytes, limit %d", what, n, limit)
	}
}

// FuzzReader feeds an arbitrary byte stream to a Reader: it must never
// panic, never return a body over maxFrame, never hold a buffer over
// maxFrame, and never allocate more than its buffer's growth to maxFrame
// (plus a little for errors), whatever lengths the stream claims.
func FuzzReader(f *testing.F) {
	_, reader := seeds(f)
	for _, input := range reader {
		f.Add(input)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		// A small bufio.Reader (NewReader keeps it) splits frames across
		// its refills, and spares each input a 64 KiB buffer.
		var r *Reader
		var frames int
		read := func() {
			r = NewReader(bufio.NewReaderSize(bytes.NewReader(data), 64), fuzzMaxFrame)
			frames = 0
			for {
				h, body, err := r.Next()
				if err != nil && !errors.Is(err, ErrUnsupportedVersion) {
					return
				}
				frames++
				if len(body) > fuzzMaxFrame-headerLen || cap(r.buf) > fuzzMaxFrame {
					t.Fatalf("body of %d bytes, buffer of %d, maxFrame %d", len(body), cap(r.buf), fuzzMaxFrame)
				}
				if err == nil && h.Version != Version {
					t.Fatalf("version %d frame returned without an error", h.Version)
				}
			}
		}
		// The buffer grows by doubling to at most maxFrame; the rest is
		// the Reader, its bufio.Reader and the errors.
		checkAllocated(t, 2*fuzzMaxFrame+1<<10, fmt.Sprintf("reading %d bytes", len(data)), read)
		if frames > len(data)/HeaderSize {
			t.Fatalf("%d frames from %d bytes", frames, len(data))
		}
	})
}

// FuzzDecode decodes an arbitrary body into the message its first byte
// names (into every message, for an unknown type). Decode must never
// panic and must allocate in proportion to the body; whatever decodes
// must encode, and decode again to the same value.
func FuzzDecode(f *testing.F) {
	decode, _ := seeds(f)
	for _, input := range decode {
		f.Add(input)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		typ, body := Type(data[0]), data[1:]
		var msgs []Message
		if m := NewMessage(typ); m != nil {
			msgs = append(msgs, m)
		} else {
			for ty := TypeError; NewMessage(ty) != nil; ty++ {
				msgs = append(msgs, NewMessage(ty))
			}
		}
		for _, m := range msgs {
			// A decoded list takes under 16 bytes of memory per byte of
			// body (a Cap takes 56 bytes from at least 7, a RecordItem 80
			// from 6, a Member 64 from 6); errors take a little more.
			var err error
			checkAllocated(t, 16*uint64(len(body))+1<<10, fmt.Sprintf("decoding %d bytes into %T", len(body), m), func() {
				m = NewMessage(m.Type())
				err = Decode(body, m)
			})
			if err != nil {
				if !errors.Is(err, ErrBadRequest) {
					t.Fatalf("Decode into %T: %v does not wrap ErrBadRequest", m, err)
				}
				continue
			}
			frame, err := AppendFrame(nil, 1, m)
			if err != nil {
				t.Fatalf("%T decoded but does not encode: %v\n%+v", m, err, m)
			}
			again := NewMessage(m.Type())
			if err := Decode(frame[HeaderSize:], again); err != nil {
				t.Fatalf("%T re-encoded does not decode: %v\n%+v", m, err, m)
			}
			if !sameValue(m, again) {
				t.Fatalf("%T changed in a round trip:\n%+v\n%+v", m, m, again)
			}
			// And into the message already used (reused slices).
			if err := Decode(frame[HeaderSize:], m); err != nil || !sameValue(m, again) {
				t.Fatalf("%T decoded into a reused message: %v\n%+v\n%+v", m, err, m, again)
			}
			// An error from the wire matches its code's sentinel, and only
			// that one, so a client's errors.Is holds whatever a peer sent.
			if pe, ok := m.(*Error); ok {
				s := pe.Code.Sentinel()
				if s != nil && (!errors.Is(pe, s) || CodeOf(pe) != pe.Code) {
					t.Fatalf("error of code %v does not match its sentinel %v", pe.Code, s)
				}
				if s == nil && (errors.Is(pe, ErrBadRequest) || errors.Unwrap(pe) != nil) {
					t.Fatalf("error of unknown code %v matches a sentinel", pe.Code)
				}
				_ = pe.Error()
			}
		}
	})
}
