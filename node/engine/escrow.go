package engine

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/fcap-io/fcap"
)

// Escrowed strict caps across regions (ARCHITECTURE.md, "Regions",
// "Strict caps: escrow"). With peer regions, a strict cap's limit L is
// split into one share per region, and a region grants only from its
// own. For a strict cap with window W, region r at time t counts
//
//	G: its grants in (t-W, t] (the cap's own counter, reservations too),
//	O: the units it lent, stamped when it lent them, in (t-2W, t],
//	I: the units it borrowed, stamped when it first asked, in (t-W, t],
//
// and grants while G + O < base + I; it lends one unit while
// G + O + 1 <= base (never a borrowed unit). A loan stays 2W at the
// lender because a grant made with a credit the last moment it counts
// (W after the ask, hence at most W after the loan) lasts W more.
// O and I are sliding counters of the viewer, keyed by the cap and the
// region's own name, so they replicate, log, merge and expire like any
// other counter, and one region's counters merged into another's (a soft
// change ships a viewer whole) are never read there.

// Shares is a region's place among the regions that split strict caps
// (Config.Shares). Every region must hold the same set of names: each
// takes Index in the sorted set.
type Shares struct {
	// Index is this region's place in the sorted set of region names.
	Index int
	// Regions is the number of regions, at least 2.
	Regions int
	// Tag names this region's loan and credit counters (ShareTag of its
	// name).
	Tag uint64

	// retired are the regions an operator retired (Retire, retire.go):
	// an immutable slice swapped whole; nil: none.
	retired atomic.Pointer[[]retirement]
}

// ShareTag is the Tag of the region named name.
func ShareTag(name string) uint64 { return xxhash.Sum64String("fcap-escrow-region\x00" + name) }

// Validate checks s.
func (s *Shares) Validate() error {
	if s.Regions < 2 || s.Index < 0 || s.Index >= s.Regions {
		return fmt.Errorf("%w: shares: region %d of %d", fcap.ErrInvalid, s.Index, s.Regions)
	}
	return nil
}

// Base is the share of a limit this region holds at now for the viewer
// with key vk and the cap c with key kh. It starts static: floor(L/k),
// plus one of the L mod k units left over, which go to the regions at a
// rotation keyed by the viewer and the cap, so that a cap with fewer
// units than regions does not always favour the same region: unit u of
// L belongs to region (rot+u) mod k. The bases of all the regions sum
// to L. Once a retired region's units are free for c (retire.go), they
// go to the remaining regions, and this region's base only grows.
func (s *Shares) Base(vk, kh uint64, c *fcap.Cap, now int64) int64 {
	k := int64(s.Regions)
	rot := int64(mix(vk^kh*0x9e3779b97f4a7c15^uint64(c.WindowMillis())) % uint64(k))
	if gone := s.gone(c, now); gone != nil {
		return s.inherited(rot, c.Limit, gone)
	}
	base, extra := c.Limit/k, c.Limit%k
	if (int64(s.Index)-rot+k)%k < extra {
		base++
	}
	return base
}

// MaxEscrowWindow is the longest window of a strict cap that lends: its
// loans are kept twice the window.
const MaxEscrowWindow = fcap.MaxWindow / 2

// The kinds of an escrow counter.
const (
	kindLent   = 0x6c656e74 // "lent"
	kindCredit = 0x63726564 // "cred"
)

// escrowCap is the counter of c that holds this region's loans or
// credits, and its key: a sliding counter of up to c.Limit entries,
// window 2W for loans, W for credits.
func (s *Shares) escrowCap(c *fcap.Cap, kh uint64, kind uint64) (fcap.Cap, uint64) {
	w := c.Window
	if kind == kindLent {
		w *= 2
	}
	ec := fcap.Cap{Scope: "escrow", ID: "", Limit: c.Limit, Window: w, Algorithm: fcap.Sliding, Mode: fcap.Strict}
	return ec, mix(kh ^ s.Tag*0xbf58476d1ce4e5b9 ^ kind<<32 ^ uint64(c.WindowMillis()))
}

// escrowCount is the count at now of c's loan or credit counter.
func (s *Shares) escrowCount(v *viewer, c *fcap.Cap, kh uint64, kind uint64, now int64) int64 {
	if v == nil {
		return 0
	}
	ec, ek := s.escrowCap(c, kh, kind)
	i, ok := v.find(ek)
	if !ok {
		return 0
	}
	h := v.header(i)
	return v.count(&h, now, ec.WindowMillis())
}

// limitOf is what region s may count against c now: base + I - O, at
// least 0.
func (s *Shares) limitOf(v *viewer, vk, kh uint64, c *fcap.Cap, now int64) int64 {
	return max(0, s.Base(vk, kh, c, now)+s.escrowCount(v, c, kh, kindCredit, now)-s.escrowCount(v, c, kh, kindLent, now))
}

// evaluateWrite is v.evaluate for a write: with Config.Shares, each strict
// cap is judged against this region's share instead of its limit, and
// w.ShareSpent says a strict cap blocked whose limit alone would not
// have (a peer region may have units to lend).
func (e *Engine) evaluateWrite(w *Write, v *viewer, vk uint64, caps []fcap.Cap, khs []uint64, now int64) fcap.Verdict {
	sh := e.cfg.Shares
	if sh == nil || !anyStrict(caps) {
		return e.evaluate(v, caps, khs, now)
	}
	if w == nil {
		w = &Write{}
	}
	w.ShareSpent = false
	judged := append(w.judged[:0], caps...)
	for i := range judged {
		if judged[i].Mode == fcap.Strict {
			judged[i].Limit = sh.limitOf(v, vk, khs[i], &caps[i], now)
		}
	}
	vd := e.evaluate(v, judged, khs, now)
	clear(judged) // drop references to the caller's strings
	w.judged = judged[:0]
	if !vd.Allowed {
		c := &caps[vd.Blocking]
		w.ShareSpent = c.Mode == fcap.Strict && (v == nil || e.used(v, c, khs[vd.Blocking], now) < c.Limit)
	}
	return vd
}

func anyStrict(caps []fcap.Cap) bool {
	for i := range caps {
		if caps[i].Mode == fcap.Strict {
			return true
		}
	}
	return false
}

// transferHash is the id memory's entry for transfer as lent by, or
// credited to, the region with tag: distinct per region, so that one
// region's memory merged into another's never answers for it.
func transferHash(tag, transfer, kind uint64) uint64 {
	return mix(transfer ^ tag*0x94d049bb133111eb ^ kind)
}

// Lend takes one unit of this region's share of the strict cap c for a
// peer region's transfer, at now, if the region has one unused: its own
// grants and loans in the window leave room under its base share
// (borrowed units are never lent on). A transfer already lent is
// answered true again and lends nothing more: a borrower retries with
// the same id. The loan is a counter entry that stays twice the cap's
// window; the caller replicates the viewer before it answers.
func (e *Engine) LendWrite(w *Write, viewer string, c fcap.Cap, now int64, transfer uint64) (lent bool, err error) {
	if err := e.escrowArgs(viewer, &c, now, transfer); err != nil {
		return false, err
	}
	kh := c.Key()
	mark, err := e.checkTime(now)
	if err != nil {
		return false, err
	}
	e.observe(mark)
	h, s := e.lockViewer(viewer)
	defer s.mu.Unlock()
	v := s.lookup(h)
	idh := transferHash(e.cfg.Shares.Tag, transfer, kindLent)
	if v != nil && v.ext != nil && v.ext.hasSeen(idh) {
		return true, nil
	}
	var used int64
	if v != nil {
		used = e.used(v, &c, kh, now) + e.cfg.Shares.escrowCount(v, &c, kh, kindLent, now)
	}
	if used+1 > e.cfg.Shares.Base(h, kh, &c, now) {
		return false, nil
	}
	ec, ek := e.cfg.Shares.escrowCap(&c, kh, kindLent)
	if err := e.escrowRecord(w, s, v, h, ec, ek, now, idh); err != nil {
		return false, err
	}
	return true, nil
}

// CreditWrite records that a peer region lent this region one unit of
// the strict cap c for transfer, stamped at (when this region first
// asked for it, not when the answer came: a grant made with it must age
// out before the lender's loan does). A transfer already credited adds
// nothing. It reports whether it added the credit.
func (e *Engine) CreditWrite(w *Write, viewer string, c fcap.Cap, at int64, transfer uint64) (credited bool, err error) {
	if err := e.escrowArgs(viewer, &c, at, transfer); err != nil {
		return false, err
	}
	kh := c.Key()
	if _, err := e.checkTime(at); err != nil {
		return false, err
	}
	h, s := e.lockViewer(viewer)
	defer s.mu.Unlock()
	v := s.lookup(h)
	idh := transferHash(e.cfg.Shares.Tag, transfer, kindCredit)
	if v != nil && v.ext != nil && v.ext.hasSeen(idh) {
		return false, nil
	}
	if at <= e.hw.Load()-c.WindowMillis() || (v != nil && !v.recordable(at)) {
		return false, nil // aged out already: it would count for nothing
	}
	ec, ek := e.cfg.Shares.escrowCap(&c, kh, kindCredit)
	if err := e.escrowRecord(w, s, v, h, ec, ek, at, idh); err != nil {
		return false, err
	}
	return true, nil
}

// escrowArgs checks what LendWrite and CreditWrite are given.
func (e *Engine) escrowArgs(viewer string, c *fcap.Cap, t int64, transfer uint64) error {
	switch {
	case e.cfg.Shares == nil:
		return fmt.Errorf("%w: an escrow write needs the region's shares (Config.Shares)", fcap.ErrInvalid)
	case transfer == 0:
		return fmt.Errorf("%w: transfer id 0", fcap.ErrInvalid)
	case c.Mode != fcap.Strict:
		return fmt.Errorf("%w: only strict caps are escrowed", fcap.ErrInvalid)
	case c.Window > MaxEscrowWindow:
		return fmt.Errorf("%w: a strict cap of window %v lends no share (at most %v)", fcap.ErrInvalid, c.Window, time.Duration(MaxEscrowWindow))
	}
	if err := e.validateViewer(viewer); err != nil {
		return err
	}
	if !validTime(t) {
		return fcap.ErrBadTime
	}
	return e.validateCaps([]fcap.Cap{*c})
}

// escrowRecord adds one entry at t to the escrow counter ec (key ek) of
// the viewer with key h, remembers idh until the entry ages out, and
// logs the viewer's state through w. The caller holds s.mu.
func (e *Engine) escrowRecord(w *Write, s *stripe, v *viewer, h uint64, ec fcap.Cap, ek uint64, t int64, idh uint64) error {
	khs := []uint64{ek}
	v, err := e.prepare(s, v, h, khs, true)
	if err != nil {
		return err
	}
	before, keys := v.bytes(), v.nkeys()
	e.record(v, []fcap.Cap{ec}, khs, t)
	e.remember(v, idh, t+ec.WindowMillis())
	e.settle(s, v, before, keys)
	if w != nil {
		w.wrote(e, s, h)
	}
	return nil
}

// mix is the splitmix64 finalizer: a bijection that spreads every input
// bit over the output.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
