package ingest

import (
	"fmt"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/client"
	"github.com/fcap-io/fcap/proto"
)

// The reasons a record is bad: the values of the reason label of
// fcap_ingest_bad_records_total and of the fcap-dead-letter-reason
// header.
const (
	// ReasonUndecodable: the Decoder could not read the record.
	ReasonUndecodable = "undecodable"
	// ReasonInvalid: an impression is invalid (no id, no viewer, a cap
	// out of bounds, ...), found here or refused by the cluster.
	ReasonInvalid = "invalid"
	// ReasonFutureTime: an impression's time is further ahead of the
	// clock than the skew bound, here or on its owner.
	ReasonFutureTime = "future_time"
)

var reasons = []string{ReasonUndecodable, ReasonInvalid, ReasonFutureTime}

// check refuses an impression the cluster would refuse for what it says,
// so a bad record is found before any of its impressions is sent. now
// and skew are Unix milliseconds.
func check(it *client.RecordItem, now, skew int64) (reason string, err error) {
	imp := &it.Impression
	switch {
	case it.Viewer == "":
		return ReasonInvalid, fcap.ErrEmptyViewer
	case imp.ID == "":
		return ReasonInvalid, fcap.ErrEmptyImpressionID
	case imp.Time < 0 || imp.Time > fcap.MaxTime:
		return ReasonInvalid, fmt.Errorf("%w: %d", fcap.ErrBadTime, imp.Time)
	case imp.Time > now+skew:
		return ReasonFutureTime, fmt.Errorf("%w: %d is %d ms ahead of %d", fcap.ErrFutureTime, imp.Time, imp.Time-now, now)
	case len(imp.Caps) == 0:
		return ReasonInvalid, fcap.ErrNoCaps
	case len(imp.Caps) > proto.MaxCapsPerMessage:
		return ReasonInvalid, fcap.ErrTooManyCaps
	}
	for i := range imp.Caps {
		c := &imp.Caps[i]
		var err error
		switch {
		case c.Scope == "":
			err = fcap.ErrEmptyScope
		case c.ID == "":
			err = fcap.ErrEmptyID
		case c.Limit < 1 || c.Limit > fcap.MaxLimit:
			err = fcap.ErrBadLimit
		case c.Window < 1 || c.Window > fcap.MaxTime:
			err = fcap.ErrBadWindow
		case c.Algorithm >= fcap.NumAlgorithms:
			err = fcap.ErrUnknownAlgorithm
		case c.Mode >= fcap.NumModes:
			err = fcap.ErrUnknownMode
		}
		if err != nil {
			return ReasonInvalid, fmt.Errorf("cap %d: %w", i, err)
		}
	}
	return "", nil
}
