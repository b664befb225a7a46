package metrics

import (
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/node/engine"
	"github.com/fcap-io/fcap/proto"
)

// TestRefusedTimeCountsOwnRefusalsOnly: a time the engine refused counts
// once; a peer's refusal passed on (which is an fcap.ErrFutureTime too)
// was counted by the peer; other errors are not refusals of time.
func TestRefusedTimeCountsOwnRefusalsOnly(t *testing.T) {
	eng, err := engine.New(engine.DefaultLocalConfig())
	if err != nil {
		t.Fatal(err)
	}
	m, err := newTime(prometheus.NewRegistry(), eng)
	if err != nil {
		t.Fatal(err)
	}
	m.RefusedTime(OpCheck, fmt.Errorf("check: %w: 10 ticks ahead", fcap.ErrFutureTime))
	m.RefusedTime(OpCheck, fmt.Errorf("link: %w", &proto.Error{Code: proto.CodeFutureTime}))
	m.RefusedTime(OpCheck, fcap.ErrBadLimit)
	m.RefusedTime(OpCheck, nil)
	if got := testutil.ToFloat64(m.refused[OpCheck]); got != 1 {
		t.Fatalf("refused = %v, want 1", got)
	}
}
