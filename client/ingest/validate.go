package ingest

import (
	"fmt"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/client"
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
// so a bad record is found before any of its impressions is sent: what
// lim refuses (fcap's shared validation), and a time further ahead of now
// than skew (Unix milliseconds).
func check(it *client.RecordItem, lim fcap.Limits, now, skew int64) (reason string, err error) {
	if err := fcap.ValidateViewer(it.Viewer, lim); err != nil {
		return ReasonInvalid, err
	}
	if err := it.Impression.Validate(lim); err != nil {
		return ReasonInvalid, err
	}
	if t := it.Impression.Time; t > now+skew {
		return ReasonFutureTime, fmt.Errorf("%w: %d is %d ms ahead of %d", fcap.ErrFutureTime, t, t-now, now)
	}
	return "", nil
}
