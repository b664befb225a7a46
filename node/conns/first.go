package conns

// firstSize is how many of a connection's first bytes its place holds:
// a frame header of the data plane.
const firstSize = 16

// ReadFirst reads until the place holds at least k of the connection's
// first bytes (k at most 16), taking in each read whatever has arrived,
// up to 16 bytes; it returns the bytes held. Read gives them back before
// reading on. A connection that sends nothing costs no buffer, and one
// whose header has arrived takes it in one read.
func (c *Conn) ReadFirst(k int) ([]byte, error) {
	if c.first == nil {
		c.first = make([]byte, firstSize)
	}
	for c.held < k {
		m, err := c.Conn.Read(c.first[c.held:])
		c.held += m
		if err != nil {
			return c.first[:c.held], err
		}
	}
	return c.first[:c.held], nil
}

// Give makes b the connection's first bytes, read by someone else (the
// pre-authentication poller): Read gives them back before reading on.
func (c *Conn) Give(b []byte) {
	c.first, c.held, c.given = b, len(b), 0
}

// Read gives the first bytes (ReadFirst, Give), then reads the
// connection. The first bytes are let go once given.
func (c *Conn) Read(p []byte) (int, error) {
	if c.given < c.held {
		m := copy(p, c.first[c.given:c.held])
		c.given += m
		if c.given == c.held {
			c.first, c.held, c.given = nil, 0, 0
		}
		return m, nil
	}
	return c.Conn.Read(p)
}
