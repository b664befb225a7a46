package proto

// RetireRegion asks a node to retire a peer region lost for good
// (fcapctl region retire): its link stops, its requests are refused,
// and its shares of strict caps go to the remaining regions once its
// last grants and loans aged out (ARCHITECTURE.md, "Strict caps:
// escrow"). The node refuses its own region, a name that is not a peer
// region, and, unless Force, a region its link reaches now. The retire
// spreads to the region's other nodes with gossip. It is answered with
// a RetireRegionResult or an Error. Operators only.
//
// Wire: [region str, force bool].
type RetireRegion struct {
	// Region is the peer region's name.
	Region string
	// Force retires it even if the node's link reaches it now.
	Force bool
}

// Type returns TypeRetireRegion.
func (*RetireRegion) Type() Type { return TypeRetireRegion }

func (m *RetireRegion) encode(e *encoder) {
	e.array(2)
	e.str(m.Region)
	e.bool(m.Force)
}

func (m *RetireRegion) decode(d *decoder) {
	extra := d.array(2)
	m.Region, m.Force = d.str(), d.bool()
	d.end(extra)
}

// RetireRegionResult answers RetireRegion: the region is retired on the
// node.
//
// Wire: [at_ms int, new bool].
type RetireRegionResult struct {
	// AtMillis is when the node retired it (its clock, Unix ms): T0.
	AtMillis int64
	// New says this request retired it; false: it was retired already
	// (AtMillis is the first retire's).
	New bool
}

// Type returns TypeRetireRegionResult.
func (*RetireRegionResult) Type() Type { return TypeRetireRegionResult }

func (m *RetireRegionResult) encode(e *encoder) {
	e.array(2)
	e.int(m.AtMillis)
	e.bool(m.New)
}

func (m *RetireRegionResult) decode(d *decoder) {
	extra := d.array(2)
	m.AtMillis, m.New = d.int(), d.bool()
	d.end(extra)
}
