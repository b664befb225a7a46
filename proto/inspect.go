package proto

// Inspect asks a node for everything it holds for one viewer (fcapctl
// keys, for support tickets). It is answered with a ViewerState.
//
// Wire: [viewer str].
type Inspect struct {
	Viewer string
}

// Type returns TypeInspect.
func (*Inspect) Type() Type { return TypeInspect }

func (m *Inspect) encode(e *encoder) {
	e.array(1)
	e.str(m.Viewer)
}

func (m *Inspect) decode(d *decoder) {
	extra := d.array(1)
	m.Viewer = d.str()
	d.end(extra)
}

// MaxInspectKeys bounds the counters a ViewerState carries, and
// MaxInspectValues the timestamps or counts of one counter.
const (
	MaxInspectKeys   = 1 << 12
	MaxInspectValues = 1 << 16
)

// KeyInfo is one counter of a viewer: its hash (fcap.KeyHash of the
// caps that read it), algorithm, window and limit, and its state.
//
// Wire: [hash uint, algorithm uint, window int, limit int, bucket int,
// values [int...]] or [..., values [int...], name str]: name, added
// later, is sent only when known.
type KeyInfo struct {
	Hash      uint64
	Algorithm uint8
	Window    int64
	Limit     int64
	// Bucket is the fixed window's or the newest bucket's index.
	Bucket int64
	// Values are a sliding counter's timestamps (ascending), a fixed
	// counter's count, or a bucketed counter's counts (oldest first).
	Values []int64
	// Name is "scope:id" of the cap the counter counts, when the
	// answering node created the counter itself since it started;
	// empty when it does not know (fcapctl keys then shows the hash).
	Name string
}

// ViewerState answers Inspect: what the answering node holds for the
// viewer, and whether it is the viewer's primary owner.
//
// Wire: [found bool, primary bool, reservations uint, remembered_ids
// uint, keys [[key info]...], linked_to str, devices [str...]]; the last
// two are optional (older nodes omit them).
type ViewerState struct {
	Found         bool
	Primary       bool
	Reservations  uint64
	RememberedIDs uint64
	Keys          []KeyInfo
	// LinkedTo is the viewer this id counts as when it is a linked
	// device; Devices the devices linked to it when it is a viewer.
	LinkedTo string
	Devices  []string
}

// Type returns TypeViewerState.
func (*ViewerState) Type() Type { return TypeViewerState }

func (m *ViewerState) encode(e *encoder) {
	e.array(7)
	e.bool(m.Found)
	e.bool(m.Primary)
	e.uint(m.Reservations)
	e.uint(m.RememberedIDs)
	e.list("keys", len(m.Keys), MaxInspectKeys)
	for i := range m.Keys {
		k := &m.Keys[i]
		if k.Name == "" {
			e.array(6)
		} else {
			e.array(7)
		}
		e.uint(k.Hash)
		e.uint(uint64(k.Algorithm))
		e.int(k.Window)
		e.int(k.Limit)
		e.int(k.Bucket)
		e.list("values", len(k.Values), MaxInspectValues)
		for _, v := range k.Values {
			e.int(v)
		}
		if k.Name != "" {
			e.str(k.Name)
		}
	}
	e.str(m.LinkedTo)
	e.list("devices", len(m.Devices), MaxInspectKeys)
	for _, d := range m.Devices {
		e.str(d)
	}
}

func (m *ViewerState) decode(d *decoder) {
	extra := d.array(5)
	m.Found = d.bool()
	m.Primary = d.bool()
	m.Reservations = d.uint()
	m.RememberedIDs = d.uint()
	n := d.list("keys", MaxInspectKeys, 7)
	m.Keys = m.Keys[:0]
	for range n {
		var k KeyInfo
		kx := d.array(6)
		k.Hash = d.uint()
		k.Algorithm = uint8(d.uintN(0xFF))
		k.Window = d.int()
		k.Limit = d.int()
		k.Bucket = d.int()
		vn := d.list("values", MaxInspectValues, 1)
		for range vn {
			k.Values = append(k.Values, d.int())
		}
		if kx > 0 {
			k.Name = d.str()
			kx--
		}
		d.end(kx)
		if d.err != nil {
			return
		}
		m.Keys = append(m.Keys, k)
	}
	m.LinkedTo, m.Devices = "", m.Devices[:0]
	if extra >= 2 {
		m.LinkedTo = d.str()
		n := d.list("devices", MaxInspectKeys, 1)
		for range n {
			m.Devices = append(m.Devices, d.str())
		}
		extra -= 2
	}
	d.end(extra)
}
