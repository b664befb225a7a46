package ingest

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/client"
)

// Decoder turns one Kafka record into the impressions it carries.
// Decode appends them to dst and returns it; an error says the record is
// malformed (it goes to the dead-letter topic as "undecodable", or
// "invalid" when the error wraps fcap.ErrInvalid). A Decoder is called
// from several goroutines at once.
type Decoder interface {
	Decode(dst []client.RecordItem, r *kgo.Record) ([]client.RecordItem, error)
}

// JSON is the default Decoder. A record's value is one impression object
// or a JSON array of them:
//
//	{
//	  "id":     "imp-8f14e45f",  // required: the impression id, the dedupe key
//	  "viewer": "v-123",         // the canonical viewer, or
//	  "device": "d-456",         // a device, resolved to its viewer (exactly one of the two)
//	  "time":   1767225600000,   // when it played: Unix ms, or an RFC 3339 string;
//	                             // absent: the Kafka record's timestamp
//	  "caps": [                  // required, at least one
//	    {"scope": "creative", "id": "cr42", "limit": 3, "window": "1h"},
//	    {"scope": "campaign", "id": "c7", "limit": 10, "window": 86400000,
//	     "algorithm": "sliding", "mode": "strict"}
//	  ]
//	}
//
// A cap's window is milliseconds, or a Go duration string ("1h", "24h")
// of a whole number of milliseconds;
// algorithm is sliding (default), buckets or fixed; mode soft (default)
// or strict. Unknown fields are ignored, so producers may carry more;
// keys are case-sensitive.
type JSON struct{}

// jsonImpression is the wire form of one impression.
type jsonImpression struct {
	ID     string    `json:"id"`
	Viewer string    `json:"viewer"`
	Device string    `json:"device"`
	Time   *jsonTime `json:"time"`
	Caps   []jsonCap `json:"caps"`
}

type jsonCap struct {
	Scope     string     `json:"scope"`
	ID        string     `json:"id"`
	Limit     int64      `json:"limit"`
	Window    jsonWindow `json:"window"`
	Algorithm string     `json:"algorithm"`
	Mode      string     `json:"mode"`
}

// jsonTime is Unix milliseconds, as a number or an RFC 3339 string.
type jsonTime int64

func (t *jsonTime) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		ts, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return fmt.Errorf("time %q: not RFC 3339", s)
		}
		*t = jsonTime(ts.UnixMilli())
		return nil
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return fmt.Errorf("time %s: not integer milliseconds", b)
	}
	*t = jsonTime(n)
	return nil
}

// jsonWindow is a window: milliseconds as a number, or a Go duration
// string, kept whole (validation refuses a fraction of a millisecond).
type jsonWindow time.Duration

func (w *jsonWindow) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		d, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("window %q: %v", s, err)
		}
		*w = jsonWindow(d)
		return nil
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return fmt.Errorf("window %s: not integer milliseconds", b)
	}
	*w = jsonWindow(fcap.Millis(n))
	return nil
}

// Decode implements Decoder.
func (JSON) Decode(dst []client.RecordItem, r *kgo.Record) ([]client.RecordItem, error) {
	var buf [1]jsonImpression
	imps, err := scanImpressions(r.Value, buf[:0])
	if err != nil {
		return dst, err
	}
	if len(imps) == 0 {
		return dst, errors.New("an empty array: no impression")
	}
	for i := range imps {
		it, err := imps[i].item(r.Timestamp)
		if err != nil {
			if len(imps) > 1 {
				err = fmt.Errorf("impression %d: %w", i, err)
			}
			return dst, err
		}
		dst = append(dst, it)
	}
	return dst, nil
}

func (j *jsonImpression) item(recorded time.Time) (client.RecordItem, error) {
	it := client.RecordItem{Viewer: j.Viewer, Impression: fcap.Impression{ID: j.ID}}
	switch {
	case j.Viewer != "" && j.Device != "":
		return it, fmt.Errorf("%w: both viewer and device given", fcap.ErrInvalid)
	case j.Viewer == "" && j.Device == "":
		return it, fcap.ErrEmptyViewer
	case j.Device != "":
		it.Viewer, it.Device = j.Device, true
	}
	if j.Time != nil {
		it.Impression.Time = int64(*j.Time)
	} else {
		it.Impression.Time = recorded.UnixMilli()
	}
	it.Impression.Caps = make([]fcap.Cap, len(j.Caps))
	for i, c := range j.Caps {
		alg, err := fcap.ParseAlgorithm(c.Algorithm)
		if err != nil {
			return it, fmt.Errorf("cap %d: %w", i, err)
		}
		mode, err := fcap.ParseMode(c.Mode)
		if err != nil {
			return it, fmt.Errorf("cap %d: %w", i, err)
		}
		it.Impression.Caps[i] = fcap.Cap{Scope: c.Scope, ID: c.ID, Limit: c.Limit, Window: time.Duration(c.Window), Algorithm: alg, Mode: mode}
	}
	return it, nil
}
