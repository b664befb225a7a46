package conformance

import (
	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/node/engine"
)

// Engine returns a Factory running each case on a fresh in-process
// engine, with the case's limit and window as a sliding campaign cap.
func Engine(cfg engine.Config) Factory {
	return func(_ int, limit, window int64) (Capper, error) {
		e, err := engine.New(cfg)
		if err != nil {
			return nil, err
		}
		return engineCapper{e: e, limit: limit, window: window}, nil
	}
}

type engineCapper struct {
	e             *engine.Engine
	limit, window int64
}

func (c engineCapper) Allow(viewer, campaign string, now int64) (bool, error) {
	vd, err := c.e.Allow(viewer, now, fcap.Cap{Scope: "campaign", ID: campaign, Limit: c.limit, Window: fcap.Millis(c.window)})
	return vd.Allowed, err
}
