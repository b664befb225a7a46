package client

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"unsafe"

	"github.com/cespare/xxhash/v2"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/proto"
)

// PreparedCandidate is a candidate encoded once, for the many checks
// that carry it: an ad server prepares each line item of its catalogue
// when it loads it, and each ad request checks the ones its targeting
// picked, with CheckPreparedInto. A check of prepared candidates copies
// their caps' wire form into the request where CheckInto encodes every
// cap anew, on the core the client shares with the ad server: about two
// fifths less CPU for a 100-candidate check whose caps are in the CPU's
// caches (BenchmarkCheckCPU/warm), a fifth less when each is a cache
// miss (/cold).
//
// A PreparedCandidate is a small value, immutable and safe to share
// between goroutines: keep them in a slice or map and copy them into
// each request's list. It keeps no reference to the candidate it was
// made from: a cap changed afterwards is not seen until the candidate is
// prepared again. The zero value is not a prepared candidate.
type PreparedCandidate struct {
	// b is the candidate in one allocation, so that a check reading
	// it from a large catalogue misses the cache once (one line for a
	// candidate of one cap with ids of up to ~30 bytes: see
	// PrepareCandidate): whether a cap is strict (1 byte), the number of
	// caps n (2 bytes), for each cap where its form ends, counted from
	// the first form, and a hash of the form (4 bytes each), then the
	// caps' wire forms one after another. All little-endian.
	b []byte
}

// preparedHead is the size of a prepared candidate's fixed header, and
// preparedEntry of each cap's entry after it.
const (
	preparedHead  = 3
	preparedEntry = 8
)

// PrepareCandidate encodes cand for CheckPreparedInto. It refuses, with
// ErrBadRequest, what a check would refuse for this candidate alone (a
// string over the wire's limit, more caps than a check carries); the
// node validates the rest at each check, as it does for CheckInto.
func PrepareCandidate(cand fcap.Candidate) (PreparedCandidate, error) {
	n := len(cand.Caps)
	if n > proto.MaxCheckCaps-1 {
		return PreparedCandidate{}, fmt.Errorf("%w: a candidate of %d caps, at most %d", ErrBadRequest, n, proto.MaxCheckCaps-1)
	}
	head := preparedHead + preparedEntry*n
	tmp := make([]byte, head, head+32*n)
	binary.LittleEndian.PutUint16(tmp[1:], uint16(n))
	start := head
	for i := range cand.Caps {
		c := &cand.Caps[i]
		var err error
		if tmp, err = proto.AppendCapForm(tmp, c); err != nil {
			return PreparedCandidate{}, fmt.Errorf("%w: %v", ErrBadRequest, err)
		}
		e := tmp[preparedHead+preparedEntry*i:]
		binary.LittleEndian.PutUint32(e, uint32(len(tmp)-head))
		binary.LittleEndian.PutUint32(e[4:], uint32(xxhash.Sum64(tmp[start:])))
		start = len(tmp)
		if c.Mode == fcap.Strict {
			tmp[0] = 1
		}
	}
	// A candidate of up to a cache line gets a whole one: Go places
	// objects of 64 bytes on 64-byte boundaries, where a 48-byte one
	// may straddle two lines, each a miss of its own in a check.
	b := make([]byte, len(tmp), max(len(tmp), 64))
	copy(b, tmp)
	return PreparedCandidate{b: b}, nil
}

// Caps returns how many caps the candidate carries.
func (p PreparedCandidate) Caps() int {
	if len(p.b) < preparedHead {
		return 0
	}
	return int(binary.LittleEndian.Uint16(p.b[1:]))
}

// strict reports whether a cap of the candidate is strict.
func (p PreparedCandidate) strict() bool { return p.b[0] != 0 }

// form returns cap j's wire form and its hash; n is Caps().
func (p PreparedCandidate) form(j, n int) ([]byte, uint32) {
	forms := p.b[preparedHead+preparedEntry*n:]
	start := uint32(0)
	if j > 0 {
		start = binary.LittleEndian.Uint32(p.b[preparedHead+preparedEntry*(j-1):])
	}
	e := p.b[preparedHead+preparedEntry*j:]
	return forms[start:binary.LittleEndian.Uint32(e)], binary.LittleEndian.Uint32(e[4:])
}

// same reports whether p and q are the same prepared candidate (one
// PrepareCandidate's result, copied).
func (p PreparedCandidate) same(q PreparedCandidate) bool {
	return len(p.b) == len(q.b) && unsafe.SliceData(p.b) == unsafe.SliceData(q.b)
}

// sameForm reports whether two caps' forms, with their hashes, are
// equal: the hashes first, which differ for nearly every two caps.
func sameForm(a []byte, ha uint32, b []byte, hb uint32) bool {
	return ha == hb && bytes.Equal(a, b)
}

// CheckPreparedInto is CheckInto for prepared candidates: the same
// request on the wire, the same verdicts, the same failure policy,
// without encoding the caps again. A zero PreparedCandidate is refused
// with ErrBadRequest.
func (c *Client) CheckPreparedInto(ctx context.Context, viewer string, cands []PreparedCandidate, res *CheckResult, opts ...CallOption) error {
	return c.checkBuilt(ctx, viewer, res, opts, func() error { return res.resetPrepared(cands) })
}

// resetPrepared builds the request table as reset does, from prepared
// candidates: a cap equal to the one at the same position of the
// previous candidate is sent once (equal caps have equal wire forms),
// every other cap's form is copied in.
func (r *CheckResult) resetPrepared(cands []PreparedCandidate) error {
	if err := r.begin(len(cands)); err != nil {
		return err
	}
	t := &r.table
	// A first pass, as in reset: each candidate is a cache miss of its
	// own in a large catalogue, and this short loop has many of them in
	// flight where the copying loop below would wait for each in turn.
	for i := range cands {
		if len(cands[i].b) < preparedHead {
			r.strict = r.strict[:0]
			return fmt.Errorf("%w: candidate %d is not prepared (a zero PreparedCandidate)", ErrBadRequest, i)
		}
		r.strict[i] = cands[i].strict()
	}
	var prev PreparedCandidate
	prevN, prevStart := 0, 0 // the previous candidate's caps, where its refs begin
	for _, p := range cands {
		start := len(t.Refs)
		n := p.Caps()
		if n == 1 && prevN == 1 && !p.same(prev) {
			// The common case, one cap after one cap, without the
			// general loop's offsets: the single form is all of the rest.
			const one = preparedHead + preparedEntry
			f := p.b[one:]
			if sameForm(prev.b[one:], binary.LittleEndian.Uint32(prev.b[one-4:]), f, binary.LittleEndian.Uint32(p.b[one-4:])) {
				t.Refs = append(t.Refs, t.Refs[prevStart])
			} else if err := r.addForm(f); err != nil {
				return err
			}
			t.Ends = append(t.Ends, uint32(len(t.Refs)))
			prev, prevStart = p, start
			continue
		}
		for j := range n {
			f, h := p.form(j, n)
			if j < prevN {
				if pf, ph := prev.form(j, prevN); p.same(prev) || sameForm(pf, ph, f, h) {
					t.Refs = append(t.Refs, t.Refs[prevStart+j])
					continue
				}
			}
			if err := r.addForm(f); err != nil {
				return err
			}
		}
		t.Ends = append(t.Ends, uint32(len(t.Refs)))
		prev, prevN, prevStart = p, n, start
	}
	return nil
}

// addForm adds a distinct cap, in its wire form, to the request and a
// reference to it to the current candidate.
func (r *CheckResult) addForm(form []byte) error {
	k := r.caps.Len()
	if k >= proto.MaxCheckCaps-1 {
		r.strict = r.strict[:0]
		return fmt.Errorf("%w: more than %d distinct caps", ErrBadRequest, proto.MaxCheckCaps-1)
	}
	r.caps.AppendForm(form)
	r.table.Refs = append(r.table.Refs, uint16(k))
	return nil
}
