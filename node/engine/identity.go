package engine

import (
	"fmt"
	"slices"
	"strings"

	"github.com/fcap-io/fcap"
)

// Cross-device identity. A device links to a canonical viewer; checks
// and writes naming the device count against the viewer. Devices and
// viewers share one id space: an unlinked device is its own viewer, and
// the engine holds identity beside the counters of the same id:
//
//   - a device's slot holds its link (the viewer it counts as, and when
//     the link or unlink was made), on the device's partition;
//   - a viewer's slot holds the devices linked to it (each with when it
//     was linked or unlinked), on the viewer's partition.
//
// Both travel with the slot's state (replication, partition moves, the
// log and snapshots), and merge by "last write wins" on their times, so
// replicas converge whatever the order of shipments. Unlinks are kept as
// tombstones for TombstoneRetention so that an older copy cannot bring a
// link back.
//
// Linking a device that has impressions of its own merges them into the
// viewer's counters, once: the viewer's list of devices says which have
// been merged, so a retried link adds nothing twice.

// Identity errors. All wrap ErrInvalid: the request is refused and
// changes nothing.
var (
	ErrLinkSelf       = fmt.Errorf("%w: a device cannot be linked to itself", fcap.ErrInvalid)
	ErrLinkChain      = fmt.Errorf("%w: links do not chain", fcap.ErrInvalid)
	ErrTooManyDevices = fmt.Errorf("%w: the viewer has the maximum number of linked devices", fcap.ErrInvalid)
)

// TombstoneRetention is how long an unlink is remembered (milliseconds):
// a replica away longer than this could bring the link back.
const TombstoneRetention = 7 * 24 * 3_600_000

// identity is a slot's identity data.
type identity struct {
	// As a device: the viewer it is linked to ("" after an unlink, or
	// never linked) and when that was decided; linkAt 0 when it never was.
	viewer string
	linkAt int64
	// As a viewer: its devices, sorted by name.
	devices []deviceLink
}

type deviceLink struct {
	name string
	at   int64 // when it was linked or unlinked
	gone bool  // unlinked (a tombstone)
}

func (id *identity) empty() bool { return id.linkAt == 0 && len(id.devices) == 0 }

func (id *identity) bytes() int64 {
	b := int64(48 + len(id.viewer))
	for _, d := range id.devices {
		b += 40 + int64(len(d.name))
	}
	return b
}

// liveDevices counts the devices linked now.
func (id *identity) liveDevices() int {
	n := 0
	for _, d := range id.devices {
		if !d.gone {
			n++
		}
	}
	return n
}

func (id *identity) device(name string) (int, bool) {
	return slices.BinarySearchFunc(id.devices, name, func(d deviceLink, n string) int { return strings.Compare(d.name, n) })
}

// setDevice records a device link or unlink decided at at, unless a
// later decision is held (ties: an unlink wins, so concurrent link and
// unlink settle the same way everywhere).
func (id *identity) setDevice(d deviceLink) bool {
	i, ok := id.device(d.name)
	if !ok {
		id.devices = slices.Insert(id.devices, i, d)
		return true
	}
	have := id.devices[i]
	if d.at > have.at || (d.at == have.at && d.gone && !have.gone) {
		id.devices[i] = d
		return true
	}
	return false
}

// setLink records a device's link decided at at (viewer "" unlinks),
// unless a later decision is held (ties: the smaller viewer id wins, ""
// first, so every replica picks the same).
func (id *identity) setLink(viewer string, at int64) bool {
	if at > id.linkAt || (at == id.linkAt && viewer < id.viewer) {
		id.viewer, id.linkAt = viewer, at
		return true
	}
	return false
}

// merge folds another copy in, decision by decision.
func (id *identity) merge(o *identity) {
	if o.linkAt != 0 {
		id.setLink(o.viewer, o.linkAt)
	}
	for _, d := range o.devices {
		id.setDevice(d)
	}
}

// prune drops tombstones older than TombstoneRetention at now.
func (id *identity) prune(now int64) {
	if id.viewer == "" && id.linkAt != 0 && id.linkAt < now-TombstoneRetention {
		id.linkAt = 0
	}
	id.devices = slices.DeleteFunc(id.devices, func(d deviceLink) bool { return d.gone && d.at < now-TombstoneRetention })
}

// idOf is a viewer's identity data, nil when it has none (v may be nil).
func idOf(v *viewer) *identity {
	if v == nil || v.ext == nil {
		return nil
	}
	return v.ext.id
}

// ensureID returns v's identity data, creating it.
func (v *viewer) ensureID() *identity {
	if v.ext == nil {
		v.ext = &viewerExt{}
	}
	if v.ext.id == nil {
		v.ext.id = &identity{}
	}
	return v.ext.id
}

// canAdd reports whether device may be added to viewer, whose identity
// data is id (nil for none): linked says it is already, err why not.
func (id *identity) canAdd(viewer, device string, maxDevices int) (linked bool, err error) {
	if id == nil {
		return false, nil
	}
	if id.viewer != "" {
		return false, fmt.Errorf("%w: %q is a device linked to %q; link to that viewer", ErrLinkChain, viewer, id.viewer)
	}
	if i, ok := id.device(device); ok && !id.devices[i].gone {
		return true, nil
	}
	if id.liveDevices() >= maxDevices {
		return false, fmt.Errorf("%w (%d)", ErrTooManyDevices, maxDevices)
	}
	return false, nil
}

func (e *Engine) validateIDs(ids ...string) error {
	for _, s := range ids {
		if err := e.validateViewer(s); err != nil {
			return err
		}
	}
	return nil
}

// Resolve returns the viewer a device counts as: the viewer it is linked
// to, or the device itself (linked false) when it is not linked.
func (e *Engine) Resolve(device string) (viewer string, linked bool, err error) {
	if err := e.validateViewer(device); err != nil {
		return "", false, err
	}
	h, s := e.lockViewer(device)
	defer s.mu.Unlock()
	if id := idOf(s.lookup(h)); id != nil && id.viewer != "" {
		return id.viewer, true, nil
	}
	return device, false, nil
}

// Devices returns the devices linked to a viewer now, sorted.
func (e *Engine) Devices(viewer string) ([]string, error) {
	if err := e.validateViewer(viewer); err != nil {
		return nil, err
	}
	h, s := e.lockViewer(viewer)
	defer s.mu.Unlock()
	var out []string
	if id := idOf(s.lookup(h)); id != nil {
		for _, d := range id.devices {
			if !d.gone {
				out = append(out, d.name)
			}
		}
	}
	return out, nil
}

// LinkDevice is the device's side of a link: it records that device
// counts as viewer from time at, and returns the device's own state
// (Export's form, "absent" when it holds nothing) for the viewer's side
// to merge. It refuses a device linked to itself and a device that other
// devices are linked to (a chain). Linking again to the same viewer is
// allowed (a retry); linking to another viewer moves the device.
func (e *Engine) LinkDevice(device, viewer string, at int64, dst []byte) ([]byte, error) {
	if err := e.validateIDs(device, viewer); err != nil {
		return dst, err
	}
	if device == viewer {
		return dst, ErrLinkSelf
	}
	mark, err := e.checkTime(at)
	if err != nil {
		return dst, err
	}
	e.observe(mark)
	h, s := e.lockViewer(device)
	defer s.mu.Unlock()
	v := s.lookup(h)
	if id := idOf(v); id != nil && id.liveDevices() > 0 {
		return dst, fmt.Errorf("%w: %q has devices linked to it, so it cannot be linked as a device", ErrLinkChain, device)
	}
	dst = exportViewer(dst, h, v) // its own impressions, before the link
	v, err = e.prepare(s, v, h, nil, false)
	if err != nil {
		return dst, err
	}
	before, keys := v.bytes(), v.nkeys()
	v.ensureID().setLink(strings.Clone(viewer), at) // the caller's string may alias a buffer it reuses
	e.settle(s, v, before, keys)
	return dst, nil
}

// UnlinkDevice is the device's side of an unlink: from time at the
// device is its own viewer again (with the impressions it had before the
// link). It returns the viewer it was linked to, "" if none.
func (e *Engine) UnlinkDevice(device string, at int64) (string, error) {
	if err := e.validateViewer(device); err != nil {
		return "", err
	}
	mark, err := e.checkTime(at)
	if err != nil {
		return "", err
	}
	e.observe(mark)
	h, s := e.lockViewer(device)
	defer s.mu.Unlock()
	v := s.lookup(h)
	id := idOf(v)
	if id == nil || id.viewer == "" {
		return "", nil
	}
	before, keys := v.bytes(), v.nkeys()
	was := id.viewer
	id.setLink("", at)
	e.settle(s, v, before, keys)
	return was, nil
}

// AddDevice is the viewer's side of a link: it records device among the
// viewer's devices and, the first time, adds the device's own state (as
// LinkDevice returned it) to the viewer's counters: every impression the
// device counted then counts for the viewer too, and its impression ids
// are remembered so a retried Record is not counted again. It returns
// the impressions merged (0 on a retry). It refuses a viewer that is
// itself a linked device (a chain) and a viewer at maxDevices devices.
func (e *Engine) AddDevice(viewer, device string, at int64, deviceState []byte, maxDevices int) (merged int64, err error) {
	if err := e.validateIDs(device, viewer); err != nil {
		return 0, err
	}
	if device == viewer {
		return 0, ErrLinkSelf
	}
	mark, err := e.checkTime(at)
	if err != nil {
		return 0, err
	}
	var dev decodedState
	if len(deviceState) > 0 {
		st, _, err := e.decodeState(deviceState)
		if err != nil {
			return 0, err
		}
		if st.key != fcap.ViewerKey(device) {
			return 0, fmt.Errorf("%w: the state is not the device's", ErrBadState)
		}
		dev = st
	}
	e.observe(mark)
	h, s := e.lockViewer(viewer)
	defer s.mu.Unlock()
	v := s.lookup(h)
	if linked, err := idOf(v).canAdd(viewer, device, maxDevices); err != nil || linked {
		return 0, err // linked already: merged then
	}
	var khs []uint64
	if !dev.absent {
		for i := range dev.v.nkeys() {
			if h := dev.v.header(i); !h.lane { // lanes are not bounded by the key limit
				khs = append(khs, h.hash)
			}
		}
	}
	v, err = e.prepare(s, v, h, khs, true)
	if err != nil {
		return 0, err
	}
	before, keys := v.bytes(), v.nkeys()
	if !dev.absent && dev.key != 0 {
		merged = e.addViewer(v, &dev.v)
	}
	v.ensureID().setDevice(deviceLink{name: strings.Clone(device), at: at})
	e.settle(s, v, before, keys)
	return merged, nil
}

// CanAddDevice reports what AddDevice would refuse, without changing
// anything: a link's first step runs only if its second can succeed.
func (e *Engine) CanAddDevice(viewer, device string, maxDevices int) error {
	if err := e.validateIDs(device, viewer); err != nil {
		return err
	}
	if device == viewer {
		return ErrLinkSelf
	}
	h, s := e.lockViewer(viewer)
	defer s.mu.Unlock()
	_, err := idOf(s.lookup(h)).canAdd(viewer, device, maxDevices)
	return err
}

// RemoveDevice is the viewer's side of an unlink.
func (e *Engine) RemoveDevice(viewer, device string, at int64) error {
	if err := e.validateIDs(device, viewer); err != nil {
		return err
	}
	mark, err := e.checkTime(at)
	if err != nil {
		return err
	}
	e.observe(mark)
	h, s := e.lockViewer(viewer)
	defer s.mu.Unlock()
	v := s.lookup(h)
	id := idOf(v)
	if id == nil {
		return nil
	}
	before, keys := v.bytes(), v.nkeys()
	id.setDevice(deviceLink{name: strings.Clone(device), at: at, gone: true})
	e.settle(s, v, before, keys)
	return nil
}

// addViewer adds everything nv counted to v (impressions of another id,
// not another copy of v: nothing is assumed shared) and remembers its
// impression ids. It returns the impressions added. The stripe's lock is
// held; the caller checked the counter limits.
func (e *Engine) addViewer(v, nv *viewer) int64 {
	var added int64
	for i := range nv.nkeys() {
		nh := nv.header(i)
		added += e.addCounter(v, nv, &nh)
	}
	if nv.ext != nil {
		for _, s := range nv.ext.seen {
			e.remember(v, s.hash(), s.untilMillis())
		}
	}
	return added
}
