package ring

import (
	"bytes"
	"fmt"
	"math"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// State of a member.
type State uint8

// The states a member goes through. Only Active members own partitions.
const (
	// Joining: alive and pulling the state of the partitions it will own;
	// owns nothing yet.
	Joining State = 1
	// Active: owns partitions.
	Active State = 2
	// Leaving: handing its partitions off; owns nothing in new rings.
	Leaving State = 3
)

// String returns "joining", "active" or "leaving", or "state(N)" for an
// unknown value.
func (s State) String() string {
	switch s {
	case Joining:
		return "joining"
	case Active:
		return "active"
	case Leaving:
		return "leaving"
	}
	return fmt.Sprintf("state(%d)", uint8(s))
}

// Valid reports whether s is one of Joining, Active and Leaving.
func (s State) Valid() bool { return s >= Joining && s <= Leaving }

// Owns reports whether a member in state s owns partitions: Active
// members do, and so do Leaving ones until they have handed their
// partitions over and left the gossip pool. Joining members do not yet.
func (s State) Owns() bool { return s == Active || s == Leaving }

// Member is one node as the ring sees it.
type Member struct {
	// Name is the stable node name: it, and nothing else, places the
	// node on the ring, so a node keeps its partitions across restarts
	// and address changes.
	Name string
	// Addr is the data-plane host:port.
	Addr string
	// HTTPAddr is the HTTP (metrics, health) host:port. May be empty.
	HTTPAddr string
	// State is the member's place in its lifecycle.
	State State
	// Incarnation is the process start time in Unix nanoseconds: it
	// tells a restarted node from its earlier self.
	Incarnation int64
}

// Validate checks what Build and FromTable need of a member.
func (m Member) Validate() error {
	if m.Name == "" {
		return fmt.Errorf("%w: empty name", ErrMember)
	}
	if !m.State.Valid() {
		return fmt.Errorf("%w: %q has unknown %v", ErrMember, m.Name, m.State)
	}
	return nil
}

// metaVersion is the first element of encoded metadata. Fields may be
// appended to the encoding without changing it (decoders skip elements
// they do not know); a change that older decoders would misread must
// change it, and they then refuse the metadata instead of misreading it.
const metaVersion = 1

// metaFields is the number of array elements a metaVersion encoding has
// at least: version, Addr, HTTPAddr, State, Incarnation.
const metaFields = 5

// MaxMetaSize is the longest metadata MarshalMeta produces and
// UnmarshalMeta accepts: memberlist's node metadata limit
// (memberlist.MetaMaxSize, 512 bytes; package gossip checks the two
// agree). The ring does not import memberlist, so a client that routes by
// the ring links no gossip code.
const MaxMetaSize = 512

// MarshalMeta encodes everything but Name (memberlist carries the name) as
// msgpack for memberlist node metadata: the array
// [version, Addr, HTTPAddr, State, Incarnation]. It refuses a member that
// UnmarshalMeta would refuse (empty Addr, unknown State) and an encoding
// longer than MaxMetaSize, for which memberlist would panic.
func (m Member) MarshalMeta() ([]byte, error) {
	if m.Addr == "" {
		return nil, fmt.Errorf("%w: empty addr", ErrMeta)
	}
	if !m.State.Valid() {
		return nil, fmt.Errorf("%w: unknown %v", ErrMeta, m.State)
	}
	var buf bytes.Buffer
	buf.Grow(16 + len(m.Addr) + len(m.HTTPAddr))
	enc := msgpack.NewEncoder(&buf)
	// Writes to a bytes.Buffer do not fail, so neither do these.
	_ = enc.EncodeArrayLen(metaFields)
	_ = enc.EncodeUint(metaVersion)
	_ = enc.EncodeString(m.Addr)
	_ = enc.EncodeString(m.HTTPAddr)
	_ = enc.EncodeUint(uint64(m.State))
	_ = enc.EncodeInt(m.Incarnation)
	if buf.Len() > MaxMetaSize {
		return nil, fmt.Errorf("%w: %d bytes, more than memberlist's %d", ErrMeta, buf.Len(), MaxMetaSize)
	}
	return buf.Bytes(), nil
}

// UnmarshalMeta decodes metadata from memberlist into the member called
// name. Any malformed input (wrong types, truncated, trailing bytes, an
// unknown version or state, oversized, an empty name or addr) is an error
// wrapping ErrMeta, never a panic. Elements past the known ones are
// skipped, so a newer node may append fields.
func UnmarshalMeta(name string, meta []byte) (Member, error) {
	m, err := unmarshalMeta(name, meta)
	if err != nil {
		return Member{}, fmt.Errorf("%w: node %q: %w", ErrMeta, name, err)
	}
	return m, nil
}

func unmarshalMeta(name string, meta []byte) (Member, error) {
	if name == "" {
		return Member{}, fmt.Errorf("empty name")
	}
	if len(meta) == 0 {
		return Member{}, fmt.Errorf("no metadata")
	}
	if len(meta) > MaxMetaSize {
		return Member{}, fmt.Errorf("%d bytes, more than %d", len(meta), MaxMetaSize)
	}
	r := bytes.NewReader(meta)
	d := msgpack.NewDecoder(r)
	n, err := d.DecodeArrayLen()
	if err != nil {
		return Member{}, err
	}
	if n < metaFields {
		return Member{}, fmt.Errorf("array of %d elements, want at least %d", n, metaFields)
	}
	version, err := decodeInt(d)
	if err != nil {
		return Member{}, fmt.Errorf("version: %w", err)
	}
	if version != metaVersion {
		return Member{}, fmt.Errorf("unknown version %d", version)
	}
	m := Member{Name: name}
	if m.Addr, err = decodeString(d); err != nil {
		return Member{}, fmt.Errorf("addr: %w", err)
	}
	if m.Addr == "" {
		return Member{}, fmt.Errorf("empty addr")
	}
	if m.HTTPAddr, err = decodeString(d); err != nil {
		return Member{}, fmt.Errorf("http addr: %w", err)
	}
	state, err := decodeInt(d)
	if err != nil {
		return Member{}, fmt.Errorf("state: %w", err)
	}
	if m.State = State(state); state < 0 || state > math.MaxUint8 || !m.State.Valid() {
		return Member{}, fmt.Errorf("unknown state %d", state)
	}
	if m.Incarnation, err = decodeInt(d); err != nil {
		return Member{}, fmt.Errorf("incarnation: %w", err)
	}
	for i := metaFields; i < n; i++ {
		if err := d.Skip(); err != nil {
			return Member{}, fmt.Errorf("element %d: %w", i, err)
		}
	}
	if r.Len() != 0 {
		return Member{}, fmt.Errorf("%d bytes after the metadata", r.Len())
	}
	return m, nil
}

// decodeString decodes a msgpack string, refusing every other type
// (msgpack's DecodeString also takes nil and binary).
func decodeString(d *msgpack.Decoder) (string, error) {
	c, err := d.PeekCode()
	if err != nil {
		return "", err
	}
	if !msgpcode.IsString(c) {
		return "", fmt.Errorf("code %#x is not a string", c)
	}
	return d.DecodeString()
}

// decodeInt decodes a msgpack integer that fits an int64, refusing every
// other type (msgpack's DecodeInt64 also takes nil and floats, and wraps
// large unsigned values).
func decodeInt(d *msgpack.Decoder) (int64, error) {
	c, err := d.PeekCode()
	if err != nil {
		return 0, err
	}
	switch {
	case msgpcode.IsFixedNum(c),
		c == msgpcode.Int8, c == msgpcode.Int16, c == msgpcode.Int32, c == msgpcode.Int64,
		c == msgpcode.Uint8, c == msgpcode.Uint16, c == msgpcode.Uint32:
		return d.DecodeInt64()
	case c == msgpcode.Uint64:
		u, err := d.DecodeUint64()
		if err != nil {
			return 0, err
		}
		if u > math.MaxInt64 {
			return 0, fmt.Errorf("%d overflows int64", u)
		}
		return int64(u), nil
	}
	return 0, fmt.Errorf("code %#x is not an integer", c)
}
