package proto

// Cross-device identity. Link goes to the viewer's owner, which asks the
// device's owner to record the link (LinkDevice, node to node) and merges
// the device's impressions into the viewer. Unlink goes to the device's
// owner, which tells the viewer's owner (UnlinkDevice). Resolve goes to
// the devices' owner.

// Link links Device to Viewer: from now on the device counts as the
// viewer, and the impressions it had are merged into the viewer's
// counters (once). It is answered with a LinkResult.
//
// Wire: [device str, viewer str].
type Link struct {
	Device string
	Viewer string
}

// Type returns TypeLink.
func (*Link) Type() Type { return TypeLink }

func (m *Link) encode(e *encoder) {
	e.array(2)
	e.str(m.Device)
	e.str(m.Viewer)
}

func (m *Link) decode(d *decoder) {
	extra := d.array(2)
	m.Device = d.str()
	m.Viewer = d.str()
	d.end(extra)
}

// LinkResult answers Link: the impressions merged into the viewer (0 when
// the device was linked already).
//
// Wire: [epoch uint, merged uint].
type LinkResult struct {
	Epoch  uint64
	Merged uint64
}

// Type returns TypeLinkResult.
func (*LinkResult) Type() Type { return TypeLinkResult }

func (m *LinkResult) encode(e *encoder) {
	e.array(2)
	e.uint(m.Epoch)
	e.uint(m.Merged)
}

func (m *LinkResult) decode(d *decoder) {
	extra := d.array(2)
	m.Epoch = d.uint()
	m.Merged = d.uint()
	d.end(extra)
}

// Unlink makes Device its own viewer again. It is answered with an
// UnlinkResult naming the viewer it was linked to ("" if none).
//
// Wire: [device str].
type Unlink struct {
	Device string
}

// Type returns TypeUnlink.
func (*Unlink) Type() Type { return TypeUnlink }

func (m *Unlink) encode(e *encoder) {
	e.array(1)
	e.str(m.Device)
}

func (m *Unlink) decode(d *decoder) {
	extra := d.array(1)
	m.Device = d.str()
	d.end(extra)
}

// UnlinkResult answers Unlink.
//
// Wire: [epoch uint, viewer str].
type UnlinkResult struct {
	Epoch  uint64
	Viewer string
}

// Type returns TypeUnlinkResult.
func (*UnlinkResult) Type() Type { return TypeUnlinkResult }

func (m *UnlinkResult) encode(e *encoder) {
	e.array(2)
	e.uint(m.Epoch)
	e.str(m.Viewer)
}

func (m *UnlinkResult) decode(d *decoder) {
	extra := d.array(2)
	m.Epoch = d.uint()
	m.Viewer = d.str()
	d.end(extra)
}

// MaxResolveDevices bounds the devices one Resolve names.
const MaxResolveDevices = 1024

// Resolve asks which viewer each device counts as. Every device must be
// owned by the node asked (a client sends one Resolve per owner). A
// backup may answer when Backup is set (the owner did not).
//
// Wire: [devices [str...], backup bool].
type Resolve struct {
	Devices []string
	Backup  bool
}

// Type returns TypeResolve.
func (*Resolve) Type() Type { return TypeResolve }

func (m *Resolve) encode(e *encoder) {
	e.array(2)
	e.list("devices", len(m.Devices), MaxResolveDevices)
	for _, s := range m.Devices {
		e.str(s)
	}
	e.bool(m.Backup)
}

func (m *Resolve) decode(d *decoder) {
	extra := d.array(2)
	n := d.list("devices", MaxResolveDevices, 1)
	m.Devices = m.Devices[:0]
	for range n {
		m.Devices = append(m.Devices, d.str())
	}
	m.Backup = d.bool()
	d.end(extra)
}

// ResolveResult answers Resolve: per device, in order, the viewer it is
// linked to, or "" when it is its own viewer.
//
// Wire: [epoch uint, viewers [str...]].
type ResolveResult struct {
	Epoch   uint64
	Viewers []string
}

// Type returns TypeResolveResult.
func (*ResolveResult) Type() Type { return TypeResolveResult }

func (m *ResolveResult) encode(e *encoder) {
	e.array(2)
	e.uint(m.Epoch)
	e.list("viewers", len(m.Viewers), MaxResolveDevices)
	for _, s := range m.Viewers {
		e.str(s)
	}
}

func (m *ResolveResult) decode(d *decoder) {
	extra := d.array(2)
	m.Epoch = d.uint()
	n := d.list("viewers", MaxResolveDevices, 1)
	m.Viewers = m.Viewers[:0]
	for range n {
		m.Viewers = append(m.Viewers, d.str())
	}
	d.end(extra)
}

// LinkDevice is the device's side of a link, sent by the viewer's owner
// to the device's owner: record the link decided at At (Unix ms). With
// Unlink set it is the viewer's side of an unlink instead, sent by the
// device's owner to the viewer's owner: drop Device from Viewer's
// devices. It is answered with a LinkDeviceResult.
//
// Wire: [device str, viewer str, at int, unlink bool].
type LinkDevice struct {
	Device string
	Viewer string
	At     int64
	Unlink bool
}

// Type returns TypeLinkDevice.
func (*LinkDevice) Type() Type { return TypeLinkDevice }

func (m *LinkDevice) encode(e *encoder) {
	e.array(4)
	e.str(m.Device)
	e.str(m.Viewer)
	e.int(m.At)
	e.bool(m.Unlink)
}

func (m *LinkDevice) decode(d *decoder) {
	extra := d.array(4)
	m.Device = d.str()
	m.Viewer = d.str()
	m.At = d.int()
	m.Unlink = d.bool()
	d.end(extra)
}

// LinkDeviceResult answers LinkDevice: the device's own state before the
// link (an engine export), for the viewer's owner to merge.
//
// Wire: [state bin].
type LinkDeviceResult struct {
	State []byte
}

// Type returns TypeLinkDeviceResult.
func (*LinkDeviceResult) Type() Type { return TypeLinkDeviceResult }

func (m *LinkDeviceResult) encode(e *encoder) {
	e.array(1)
	if len(m.State) > MaxReplicateBytes {
		e.fail(errTooMany("state bytes", len(m.State), MaxReplicateBytes))
	}
	e.binHeader(len(m.State))
	e.buf = append(e.buf, m.State...)
}

func (m *LinkDeviceResult) decode(d *decoder) {
	extra := d.array(1)
	m.State = d.bytes(MaxReplicateBytes)
	d.end(extra)
}
