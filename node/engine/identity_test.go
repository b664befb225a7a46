package engine_test

import (
	"errors"
	"testing"
	"time"
	"unsafe"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/node/engine"
)

// link runs both sides of a link on one engine (the device's and the
// viewer's partitions may live on one node).
func link(t *testing.T, e *engine.Engine, device, viewer string, at int64) int64 {
	t.Helper()
	st, err := e.LinkDevice(device, viewer, at, nil)
	if err != nil {
		t.Fatalf("LinkDevice(%s, %s): %v", device, viewer, err)
	}
	n, err := e.AddDevice(viewer, device, at, st, 8)
	if err != nil {
		t.Fatalf("AddDevice(%s, %s): %v", viewer, device, err)
	}
	return n
}

// TestLinkMergesTheDevicesImpressionsOnce: a device's impressions count
// for the viewer once linked, exactly once whatever the retries, and
// every algorithm keeps its count; the device resolves to the viewer.
func TestLinkMergesTheDevicesImpressionsOnce(t *testing.T) {
	e := newEngine(t)
	sliding := campaign("s", 10, 100_000)
	fixed := fcap.Cap{Scope: "campaign", ID: "f", Limit: 10, Window: 100 * time.Second, Algorithm: fcap.Fixed}
	buckets := fcap.Cap{Scope: "campaign", ID: "b", Limit: 10, Window: 100 * time.Second, Algorithm: fcap.Buckets}
	all := []fcap.Cap{sliding, fixed, buckets}
	mustAllow(t, e, "phone", 1000, true, all...)
	mustAllow(t, e, "phone", 1001, true, all...)
	mustAllow(t, e, "tv", 1002, true, all...)
	if _, err := e.Record("phone", fcap.Impression{ID: "imp-1", Time: 1003, Caps: all}); err != nil {
		t.Fatal(err)
	}
	if got := link(t, e, "phone", "person", 2000); got != 9 {
		t.Errorf("merged %d impressions, want 9 (3 on each of 3 counters)", got)
	}
	if got := link(t, e, "phone", "person", 2000); got != 0 {
		t.Errorf("a retried link merged %d more", got)
	}
	link(t, e, "tv", "person", 2001)
	if v, linked, _ := e.Resolve("phone"); v != "person" || !linked {
		t.Errorf("Resolve(phone) = %q %v", v, linked)
	}
	if v, linked, _ := e.Resolve("laptop"); v != "laptop" || linked {
		t.Errorf("Resolve of an unlinked device = %q %v, want itself", v, linked)
	}
	for _, c := range all {
		vd := mustAllow(t, e, "person", 3000, true, c)
		if vd.Remaining != 10-4-1 {
			t.Errorf("%s: %d remaining after 4 merged impressions and this one, want 5", c.ID, vd.Remaining)
		}
	}
	// The phone's impression id came along: a retried Record through the
	// viewer counts nothing.
	if st, err := e.Record("person", fcap.Impression{ID: "imp-1", Time: 1003, Caps: all}); err != nil || st != fcap.Duplicate {
		t.Errorf("retried Record through the viewer: %v %v, want fcap.Duplicate", st, err)
	}
	if ds, _ := e.Devices("person"); len(ds) != 2 || ds[0] != "phone" || ds[1] != "tv" {
		t.Errorf("Devices = %v", ds)
	}
}

// TestLinkRefusals: self links, chains either way and too many devices
// are refused with errors wrapping ErrInvalid, changing nothing.
func TestLinkRefusals(t *testing.T) {
	e := newEngine(t)
	if _, err := e.LinkDevice("a", "a", 1, nil); !errors.Is(err, engine.ErrLinkSelf) || !errors.Is(err, fcap.ErrInvalid) {
		t.Errorf("self link: %v", err)
	}
	link(t, e, "phone", "person", 10)
	// person has devices: it cannot become a device.
	if _, err := e.LinkDevice("person", "other", 11, nil); !errors.Is(err, engine.ErrLinkChain) {
		t.Errorf("linking a viewer with devices: %v", err)
	}
	// phone is a device: nothing links to it.
	st, _ := e.LinkDevice("tablet", "phone", 12, nil)
	if _, err := e.AddDevice("phone", "tablet", 12, st, 8); !errors.Is(err, engine.ErrLinkChain) {
		t.Errorf("linking to a device: %v", err)
	}
	if _, err := e.LinkDevice("", "x", 1, nil); !errors.Is(err, fcap.ErrInvalid) {
		t.Errorf("empty device: %v", err)
	}
	for i, d := range []string{"d1", "d2"} {
		st, _ := e.LinkDevice(d, "small", int64(20+i), nil)
		if _, err := e.AddDevice("small", d, int64(20+i), st, 2); err != nil {
			t.Fatal(err)
		}
	}
	st, _ = e.LinkDevice("d3", "small", 30, nil)
	if _, err := e.AddDevice("small", "d3", 30, st, 2); !errors.Is(err, engine.ErrTooManyDevices) {
		t.Errorf("a third device on a limit of 2: %v", err)
	}
	if ds, _ := e.Devices("small"); len(ds) != 2 {
		t.Errorf("the refused link changed the devices: %v", ds)
	}
}

// TestUnlinkAndReplicasConverge: an unlink makes the device its own
// viewer again; copies exported and merged in any order agree on the
// latest decision, and an older copy does not bring an unlinked device
// back.
func TestUnlinkAndReplicasConverge(t *testing.T) {
	a := newEngine(t)
	link(t, a, "phone", "person", 100)
	devKey, viewerKey := fcap.ViewerKey("phone"), fcap.ViewerKey("person")
	oldDev, oldViewer := a.Export(devKey, nil), a.Export(viewerKey, nil)

	if was, err := a.UnlinkDevice("phone", 200); err != nil || was != "person" {
		t.Fatalf("UnlinkDevice: %q %v", was, err)
	}
	if err := a.RemoveDevice("person", "phone", 200); err != nil {
		t.Fatal(err)
	}
	if v, linked, _ := a.Resolve("phone"); v != "phone" || linked {
		t.Errorf("after unlink: %q %v", v, linked)
	}
	// An older copy merged in (a replica that missed the unlink) changes
	// nothing.
	if _, _, err := a.MergeAll(append(append([]byte(nil), oldDev...), oldViewer...), nil); err != nil {
		t.Fatal(err)
	}
	if v, _, _ := a.Resolve("phone"); v != "phone" {
		t.Errorf("an older copy brought the link back: %q", v)
	}
	if ds, _ := a.Devices("person"); len(ds) != 0 {
		t.Errorf("an older copy brought the device back: %v", ds)
	}
	// A replica that held the old copy converges on the new one.
	b := newEngine(t)
	b.Import(oldDev)
	b.Import(oldViewer)
	if _, _, err := b.MergeAll(append(a.Export(devKey, nil), a.Export(viewerKey, nil)...), nil); err != nil {
		t.Fatal(err)
	}
	for _, k := range []uint64{devKey, viewerKey} {
		da, _ := a.Digest(k, 300)
		db, _ := b.Digest(k, 300)
		if da != db || da == 0 {
			t.Errorf("key %x: digests %x and %x after merging", k, da, db)
		}
	}
	// The link survives a sweep long after every impression expired; the
	// tombstone goes after TombstoneRetention.
	c := newEngine(t)
	link(t, c, "watch", "person", 100)
	c.Observe(100 + engine.TombstoneRetention + 10)
	c.Sweep(1 << 20)
	if v, _, _ := c.Resolve("watch"); v != "person" {
		t.Errorf("a sweep dropped a live link: %q", v)
	}
	c.UnlinkDevice("watch", 200)
	c.Observe(200 + engine.TombstoneRetention + 10)
	c.Sweep(1 << 20)
	// watch's slot held only the tombstone: it is freed; person's still
	// lists watch (its side was not unlinked here), so it stays.
	if st := c.Stats(); st.Viewers != 1 {
		t.Errorf("%d viewers after the tombstone expired, want 1 (person)", st.Viewers)
	}
}

// TestLinksKeepTheirOwnStrings: a request's strings alias a read buffer
// the node reuses; the engine must copy what it keeps.
func TestLinksKeepTheirOwnStrings(t *testing.T) {
	e := newEngine(t)
	dev, who := []byte("phone"), []byte("person")
	device, viewer := unsafe.String(&dev[0], len(dev)), unsafe.String(&who[0], len(who))
	link(t, e, device, viewer, 10)
	copy(dev, "XXXXX")
	copy(who, "YYYYYY")
	if v, _, _ := e.Resolve("phone"); v != "person" {
		t.Errorf("Resolve(phone) = %q after the caller reused its buffer", v)
	}
	if ds, _ := e.Devices("person"); len(ds) != 1 || ds[0] != "phone" {
		t.Errorf("Devices(person) = %q after the caller reused its buffer", ds)
	}
}
