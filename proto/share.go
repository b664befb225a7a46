package proto

import (
	"fmt"

	"github.com/fcap-io/fcap"
)

// ShareAsk asks the owner of a viewer in another region for one unit of
// that region's share of a strict cap (escrow, node/region): the sender's
// region has spent its own. The receiver lends a unit only from its own
// base share, records the loan with the transfer id before it answers,
// replicates it to its backups, and answers a retried transfer id with
// the same loan, never a second one. Only a peer (a peer token) may send
// it. It is answered with a ShareGive, or an Error (NotOwner: the sender
// learns the region's ring again; BadRequest: among others, the two
// regions do not name the same set of regions, so their shares would
// not sum to the limit).
//
// Wire: [region str, regions [str...], viewer str, cap, transfer uint].
type ShareAsk struct {
	// Region is the asking node's region, at most MaxRegionNameLen
	// bytes.
	Region string
	// Regions are the names of every region the sender splits strict
	// caps among, its own included, sorted; at most MaxPeerRegions+1.
	Regions []string
	// Viewer is the viewer whose share is asked for.
	Viewer string
	// Cap is the strict cap.
	Cap fcap.Cap
	// Transfer names the transfer across the sender's retries; not 0.
	Transfer uint64
}

// Type returns TypeShareAsk.
func (*ShareAsk) Type() Type { return TypeShareAsk }

func (m *ShareAsk) encode(e *encoder) {
	e.array(5)
	e.regionNames(m.Region, m.Regions)
	e.str(m.Viewer)
	e.cap(&m.Cap)
	e.uint(m.Transfer)
}

func (m *ShareAsk) decode(d *decoder) {
	extra := d.array(5)
	m.Region, m.Regions = d.regionNames(m.Regions)
	m.Viewer = d.str()
	d.cap(&m.Cap)
	m.Transfer = d.uint()
	d.end(extra)
}

// ShareGive answers a ShareAsk: whether the receiver lent the unit (or
// had lent it to an earlier attempt of the same transfer).
//
// Wire: [epoch uint, given bool].
type ShareGive struct {
	// Epoch is the receiver's ring epoch.
	Epoch uint64
	// Given says one unit is lent for the transfer.
	Given bool
}

// Type returns TypeShareGive.
func (*ShareGive) Type() Type { return TypeShareGive }

func (m *ShareGive) encode(e *encoder) {
	e.array(2)
	e.uint(m.Epoch)
	e.bool(m.Given)
}

func (m *ShareGive) decode(d *decoder) {
	extra := d.array(2)
	m.Epoch = d.uint()
	m.Given = d.bool()
	d.end(extra)
}

// regionNames: region str, regions [str...]: a node's region and the
// sorted set of regions it splits strict caps among.
func (e *encoder) regionNames(region string, regions []string) {
	if len(region) > MaxRegionNameLen {
		e.fail(fmt.Errorf("region name of %d bytes, limit %d", len(region), MaxRegionNameLen))
	}
	e.str(region)
	e.list("regions", len(regions), MaxPeerRegions+1)
	for _, r := range regions {
		if len(r) > MaxRegionNameLen {
			e.fail(fmt.Errorf("region name of %d bytes, limit %d", len(r), MaxRegionNameLen))
		}
		e.str(r)
	}
}

func (d *decoder) regionNames(dst []string) (string, []string) {
	region := string(d.bytes(MaxRegionNameLen))
	dst = resize(dst, d.list("regions", MaxPeerRegions+1, 1))
	for i := range dst {
		dst[i] = string(d.bytes(MaxRegionNameLen))
	}
	return region, dst
}
