package fcap

import "fmt"

// Impression is an ad that played: it counts once on every counter its
// caps name.
type Impression struct {
	// ID names the impression for idempotency: a second Record with the
	// same ID inside the impression's longest window changes nothing.
	ID string
	// Time is when it played, in Unix milliseconds (ticks, to the
	// engine). Through the client and the JSON API, 0 means now: the
	// client stamps it with its clock when Record is called (the JSON
	// API: the node that received it), once, so every copy carries the
	// same time; the wire's omitted time is the owner's clock. Only the
	// engine itself, driven by tests and replays in explicit ticks,
	// takes 0 as tick 0.
	Time int64
	// Caps are the caps it counts against (creative, campaign,
	// advertiser, ...). Their limits set how much each sliding counter
	// retains; their windows set how long the impression matters.
	Caps []Cap
	// Reservation, when not 0, is the reservation this impression
	// confirms; it stops counting as the impression starts to.
	Reservation uint64
}

// RecordStatus says what Record did with a well-formed impression.
type RecordStatus uint8

const (
	// Recorded: the impression now counts.
	Recorded RecordStatus = iota
	// Duplicate: an impression with the same ID was already recorded;
	// nothing changed.
	Duplicate
	// Stale: the impression is at least its longest window older than
	// the newest time the engine has seen, so it could never count;
	// nothing changed.
	Stale
)

var recordStatusNames = [...]string{Recorded: "recorded", Duplicate: "duplicate", Stale: "stale"}

func (s RecordStatus) String() string {
	if int(s) < len(recordStatusNames) {
		return recordStatusNames[s]
	}
	return fmt.Sprintf("status(%d)", uint8(s))
}
