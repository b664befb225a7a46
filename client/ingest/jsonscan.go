package ingest

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/fcap-io/fcap"
)

// A reader for the JSON record schema, for speed: encoding/json's
// reflection spent half the ingester's CPU. The value is first checked
// by json.Valid, so the reader below only ever walks well-formed JSON
// and its errors are about types and fields, not syntax. Keys match
// exactly (encoding/json would also match them case-insensitively).

// scanner walks one well-formed JSON value.
type scanner struct {
	b []byte
	i int
}

var errType = errors.New("wrong JSON type")

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\r', '\n':
			s.i++
		default:
			return
		}
	}
}

// peek returns the next non-space byte, 0 at the end.
func (s *scanner) peek() byte {
	s.ws()
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

// rawString returns the next string token (quotes included).
func (s *scanner) rawString() []byte {
	start := s.i
	s.i++ // the opening quote
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case '\\':
			s.i += 2
		case '"':
			s.i++
			return s.b[start:s.i]
		default:
			s.i++
		}
	}
	return s.b[start:]
}

// str reads a string value (null reads as "").
func (s *scanner) str() (string, error) {
	switch s.peek() {
	case '"':
		raw := s.rawString()
		inner := raw[1 : len(raw)-1]
		for _, c := range inner {
			if c == '\\' || c >= 0x80 {
				var out string
				err := json.Unmarshal(raw, &out) // escapes and UTF-8 checks: the rare case
				return out, err
			}
		}
		return string(inner), nil
	case 'n':
		s.i += 4
		return "", nil
	}
	s.skip()
	return "", errType
}

// number returns the next number token.
func (s *scanner) number() []byte {
	start := s.i
	for s.i < len(s.b) {
		switch c := s.b[s.i]; {
		case c >= '0' && c <= '9', c == '-', c == '+', c == '.', c == 'e', c == 'E':
			s.i++
		default:
			return s.b[start:s.i]
		}
	}
	return s.b[start:]
}

// skip passes over one value of any kind.
func (s *scanner) skip() {
	switch s.peek() {
	case '"':
		s.rawString()
	case '{', '[':
		depth := 0
		for s.i < len(s.b) {
			switch s.b[s.i] {
			case '"':
				s.rawString()
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					s.i++
					return
				}
			}
			s.i++
		}
	case 't', 'n':
		s.i += 4
	case 'f':
		s.i += 5
	default:
		s.number()
	}
}

// object calls field for each key of an object; field must consume the
// value. A null reads as an empty object.
func (s *scanner) object(field func(key []byte) error) error {
	if ok, err := s.enter('{'); !ok {
		return err
	}
	for s.more('}') {
		raw := s.rawString()
		key := raw[1 : len(raw)-1]
		s.peek()
		s.i++ // ':'
		if err := field(key); err != nil {
			return err
		}
	}
	return nil
}

// array calls elem for each element; elem must consume it. A null reads
// as an empty array.
func (s *scanner) array(elem func() error) error {
	if ok, err := s.enter('['); !ok {
		return err
	}
	for s.more(']') {
		if err := elem(); err != nil {
			return err
		}
	}
	return nil
}

// enter reads the start of a container opened by open: it reports true
// when there are members to read, false for a null (read as empty) or
// another value (skipped, with errType).
func (s *scanner) enter(open byte) (bool, error) {
	switch s.peek() {
	case 'n':
		s.i += 4
		return false, nil
	case open:
		s.i++
		return true, nil
	default:
		s.skip()
		return false, errType
	}
}

// more steps over the separators before a container's next member: it
// reports false, having read it, at the closing byte.
func (s *scanner) more(end byte) bool {
	for {
		switch s.peek() {
		case end:
			s.i++
			return false
		case ',':
			s.i++
			continue
		}
		return true
	}
}

// int reads an integer number.
func (s *scanner) int(what string) (int64, error) {
	if s.peek() == 'n' {
		s.i += 4
		return 0, nil
	}
	if c := s.peek(); c != '-' && (c < '0' || c > '9') {
		s.skip()
		return 0, fmt.Errorf("%s: %w, want a number", what, errType)
	}
	tok := s.number()
	n, err := strconv.ParseInt(string(tok), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s %s: not integer milliseconds", what, tok)
	}
	return n, nil
}

// time reads a time: integer Unix ms or RFC 3339; false for null.
func (s *scanner) time() (int64, bool, error) {
	switch s.peek() {
	case 'n':
		s.i += 4
		return 0, false, nil
	case '"':
		v, err := s.str()
		if err != nil {
			return 0, false, fmt.Errorf("time: %w", err)
		}
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return 0, false, fmt.Errorf("time %q: not RFC 3339", v)
		}
		return t.UnixMilli(), true, nil
	}
	n, err := s.int("time")
	return n, err == nil, err
}

// window reads a window: integer ms or a Go duration string, kept whole
// (validation refuses a fraction of a millisecond); 0 for null.
func (s *scanner) window() (time.Duration, error) {
	switch s.peek() {
	case 'n':
		s.i += 4
		return 0, nil
	case '"':
		v, err := s.str()
		if err != nil {
			return 0, fmt.Errorf("window: %w", err)
		}
		d, err := time.ParseDuration(v)
		if err != nil {
			return 0, fmt.Errorf("window %q: %v", v, err)
		}
		return d, nil
	}
	n, err := s.int("window")
	return fcap.Millis(n), err
}

// impressions reads a record's value: one impression object or an array
// of them.
func scanImpressions(v []byte, out []jsonImpression) ([]jsonImpression, error) {
	if !json.Valid(v) {
		var x any
		return out, json.Unmarshal(v, &x) // the syntax error, said well
	}
	s := &scanner{b: v}
	if s.peek() == '[' {
		err := s.array(func() error {
			out = append(out, jsonImpression{})
			return s.impression(&out[len(out)-1])
		})
		return out, err
	}
	out = append(out, jsonImpression{})
	return out, s.impression(&out[len(out)-1])
}

func (s *scanner) impression(j *jsonImpression) error {
	return s.object(func(key []byte) error {
		var err error
		switch string(key) {
		case "id":
			j.ID, err = s.str()
		case "viewer":
			j.Viewer, err = s.str()
		case "device":
			j.Device, err = s.str()
		case "time":
			var t int64
			var ok bool
			if t, ok, err = s.time(); ok {
				jt := jsonTime(t)
				j.Time = &jt
			}
		case "caps":
			j.Caps = j.Caps[:0]
			err = s.array(func() error {
				j.Caps = append(j.Caps, jsonCap{})
				return s.cap(&j.Caps[len(j.Caps)-1])
			})
		default:
			s.skip()
		}
		if errors.Is(err, errType) {
			err = fmt.Errorf("%q: %w", key, err)
		}
		return err
	})
}

func (s *scanner) cap(c *jsonCap) error {
	return s.object(func(key []byte) error {
		var err error
		switch string(key) {
		case "scope":
			c.Scope, err = s.str()
		case "id":
			c.ID, err = s.str()
		case "limit":
			c.Limit, err = s.int("limit")
		case "window":
			var w time.Duration
			w, err = s.window()
			c.Window = jsonWindow(w)
		case "algorithm":
			c.Algorithm, err = s.str()
		case "mode":
			c.Mode, err = s.str()
		default:
			s.skip()
		}
		if errors.Is(err, errType) {
			err = fmt.Errorf("cap %q: %w", key, err)
		}
		return err
	})
}
