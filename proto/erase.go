package proto

// Erase forgets a viewer (a privacy request): every counter, remembered
// impression id and reservation of the viewer, and its device links. It
// goes to the viewer's owner, which keeps an erasure tombstone (logged
// and replicated to every backup before it answers) so that no older
// copy, log or snapshot brings the viewer back, and unlinks each device
// linked to the viewer on the device's owner. Erasing again is safe: it
// finishes what a failed erasure left (a device not unlinked). It is
// answered with an EraseResult, or an Error.
//
// Wire: [viewer str].
type Erase struct {
	// Viewer is the viewer id to erase: the routing key.
	Viewer string
}

// Type returns TypeErase.
func (*Erase) Type() Type { return TypeErase }

func (m *Erase) encode(e *encoder) {
	e.array(1)
	e.str(m.Viewer)
}

func (m *Erase) decode(d *decoder) {
	extra := d.array(1)
	m.Viewer = d.str()
	d.end(extra)
}

// EraseResult answers an Erase.
//
// Wire: [epoch uint, devices uint].
type EraseResult struct {
	// Epoch is the epoch of the ring the node used.
	Epoch uint64
	// Devices counts the devices that were linked to the viewer and are
	// now unlinked.
	Devices uint64
}

// Type returns TypeEraseResult.
func (*EraseResult) Type() Type { return TypeEraseResult }

func (m *EraseResult) encode(e *encoder) {
	e.array(2)
	e.uint(m.Epoch)
	e.uint(m.Devices)
}

func (m *EraseResult) decode(d *decoder) {
	extra := d.array(2)
	m.Epoch = d.uint()
	m.Devices = d.uint()
	d.end(extra)
}
