package ingest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/client"
)

// Dead-letter headers.
const (
	// HeaderReason holds why the record is bad (ReasonUndecodable, ...).
	HeaderReason = "fcap-dead-letter-reason"
	// HeaderError holds the error, for a person.
	HeaderError = "fcap-dead-letter-error"
	// HeaderSource holds where the record came from: topic/partition/offset.
	HeaderSource = "fcap-dead-letter-source"
)

// recordState is what became of one record of a batch.
type recordState struct {
	r          *kgo.Record
	start, end int // its impressions in the batch's items
	reason     string
	err        error
}

// process accounts for every record of a batch: decodes it, records its
// impressions until the cluster acknowledged or refused each, and
// dead-letters the bad ones. It reports false when ctx ended first: the
// batch is then not accounted for, and must not be committed.
func (in *Ingester) process(ctx context.Context, b *batch) bool {
	start := time.Now()
	now := in.cfg.Clock().UnixMilli()
	skew := in.cfg.MaxClockSkew.Milliseconds()
	states := make([]recordState, 0, b.n)
	items := make([]client.RecordItem, 0, b.n)
	for _, s := range b.segs {
		for _, r := range s.records {
			st := recordState{r: r, start: len(items)}
			var err error
			items, err = in.cfg.Decoder.Decode(items, r)
			switch {
			case err != nil && errors.Is(err, fcap.ErrInvalid):
				st.reason, st.err = ReasonInvalid, err
			case err != nil:
				st.reason, st.err = ReasonUndecodable, err
			default:
				for i := st.start; i < len(items); i++ {
					if reason, err := check(&items[i], in.cfg.Limits, now, skew); err != nil {
						st.reason, st.err = reason, fmt.Errorf("impression %q: %w", items[i].Impression.ID, err)
						break
					}
				}
			}
			if st.err != nil {
				items = items[:st.start] // none of a bad record's impressions is sent
			}
			st.end = len(items)
			states = append(states, st)
		}
	}

	if len(items) > 0 {
		var opts []client.SyncOption
		if in.cfg.Ack == AckReplicated {
			opts = append(opts, client.Replicated())
		}
		acks := in.rec.RecordSync(ctx, items, opts...)
		var byStatus [3]int // Recorded, Duplicate, Stale
		defer func() {
			for s, n := range byStatus {
				if n > 0 {
					in.m.status(fcap.RecordStatus(s)).Add(float64(n))
				}
			}
		}()
		for i := range states {
			st := &states[i]
			for j := st.start; j < st.end; j++ {
				a := acks[j]
				switch {
				case a.Err == nil:
					if int(a.Status) < len(byStatus) {
						byStatus[a.Status]++
					}
				case client.IsRefused(a.Err):
					if st.err == nil {
						st.reason, st.err = ReasonInvalid, a.Err
						if errors.Is(a.Err, client.ErrFutureTime) {
							st.reason = ReasonFutureTime
						}
					}
				default:
					return false // not acknowledged: ctx ended
				}
			}
		}
	}
	in.m.batch.Observe(time.Since(start).Seconds())

	if !in.deadLetter(ctx, states) {
		return false
	}
	at := time.Now()
	topic, n := "", 0
	for i := range states {
		r := states[i].r
		if r.Topic != topic {
			if n > 0 {
				in.m.records.WithLabelValues(topic).Add(float64(n))
			}
			topic, n = r.Topic, 0
		}
		n++
		in.m.delay.Observe(at.Sub(r.Timestamp).Seconds())
		if in.cfg.Acked != nil {
			in.cfg.Acked(r, at)
		}
	}
	if n > 0 {
		in.m.records.WithLabelValues(topic).Add(float64(n))
	}
	return true
}

// deadLetter counts the bad records of a batch and, when a dead-letter
// topic is configured, produces them there, retrying until produced or
// ctx ends (false: the batch must not be committed).
func (in *Ingester) deadLetter(ctx context.Context, states []recordState) bool {
	var letters []*kgo.Record
	for i := range states {
		st := &states[i]
		if st.err == nil {
			continue
		}
		in.m.bad.WithLabelValues(st.reason).Inc()
		in.bad.record(st.reason, "topic", st.r.Topic, "partition", st.r.Partition, "offset", st.r.Offset, "err", st.err)
		if in.cfg.DeadLetterTopic == "" {
			continue
		}
		headers := append([]kgo.RecordHeader(nil), st.r.Headers...)
		headers = append(headers,
			kgo.RecordHeader{Key: HeaderReason, Value: []byte(st.reason)},
			kgo.RecordHeader{Key: HeaderError, Value: []byte(st.err.Error())},
			kgo.RecordHeader{Key: HeaderSource, Value: []byte(st.r.Topic + "/" + strconv.Itoa(int(st.r.Partition)) + "/" + strconv.FormatInt(st.r.Offset, 10))})
		letters = append(letters, &kgo.Record{Topic: in.cfg.DeadLetterTopic, Key: st.r.Key, Value: st.r.Value, Headers: headers})
	}
	delay := 50 * time.Millisecond
	for len(letters) > 0 {
		results := in.kafka.ProduceSync(ctx, letters...)
		letters = letters[:0]
		for _, res := range results {
			if res.Err == nil {
				in.m.deadLetters.WithLabelValues("produced").Inc()
				continue
			}
			in.m.deadLetters.WithLabelValues("failed").Inc()
			in.log.Warn("dead letter not produced; retrying", "topic", in.cfg.DeadLetterTopic, "err", res.Err)
			letters = append(letters, res.Record)
		}
		if len(letters) == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(delay):
		}
		delay = min(2*delay, 5*time.Second)
	}
	return true
}
