package httpapi

import (
	"context"
	"crypto/tls"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/client"
)

// Config is what a node gives the JSON API it serves (see Start). Its
// fields are node.APIEnv's, so a node's environment converts to it:
// cmd/fcapd sets node.Config.API to
//
//	func(env node.APIEnv) (node.API, error) { return httpapi.Start(httpapi.Config(env)) }
//
// and the node never imports the client.
type Config struct {
	// DataAddr is the node's data-plane address: the API's client is
	// seeded with it.
	DataAddr string
	// Timeout bounds each call to the cluster unless the request asks
	// for less (Options.Timeout, client.Config.Timeout).
	Timeout time.Duration
	// MaxBody limits request bodies (Options.MaxBody).
	MaxBody int64
	// Logger receives the API's client's logs.
	Logger *slog.Logger
	// Registerer receives the API's client's metrics.
	Registerer prometheus.Registerer
	// TLS, when not nil, is how the node dials its peers: the API's
	// client reaches the nodes over TLS as any client does.
	TLS *tls.Config
	// Limits are the node's engine's: the API refuses at once what the
	// node would refuse.
	Limits fcap.Limits
	// Clock and MaxClockSkew are the node's (Options.Clock).
	Clock        func() int64
	MaxClockSkew time.Duration
	// RefusedTime counts a time ahead of Clock refused at the edge
	// (Options.RefusedTime).
	RefusedTime func(op string)
	// Bearer and Token, both set when the nodes require tokens: Bearer
	// decides which bearer tokens HTTP callers may present
	// (Options.Bearer), and Token is the one the API's client presents
	// (client.Config.TokenFunc). Both follow a reloaded tokens file.
	Bearer func(token string) bool
	Token  func() string
}

// Gateway is the JSON API of a node with the smart client it goes
// through: a request for a viewer this node does not own is sent to its
// owner in one hop, with the Go client's deadlines, backup reads and
// failure policy.
type Gateway struct {
	*API
	c *client.Client
}

// Start starts the API's client, seeded with the node at cfg.DataAddr,
// and returns the API over it.
func Start(cfg Config) (*Gateway, error) {
	ccfg := client.DefaultConfig(cfg.DataAddr)
	ccfg.Timeout = cfg.Timeout
	ccfg.Logger = cfg.Logger
	ccfg.Registerer = cfg.Registerer
	ccfg.TLS = cfg.TLS
	ccfg.Limits = cfg.Limits
	ccfg.TokenFunc = cfg.Token
	c, err := client.New(ccfg)
	if err != nil {
		return nil, err
	}
	opts := Options{MaxBody: cfg.MaxBody, Timeout: cfg.Timeout, Clock: cfg.Clock, MaxClockSkew: cfg.MaxClockSkew,
		RefusedTime: cfg.RefusedTime, Bearer: cfg.Bearer}
	return &Gateway{API: New(c, opts), c: c}, nil
}

// Counts is the calls the API's client made to the cluster and the
// verdicts its failure policy allowed (client.Stats' Calls and
// FailOpen), for the node's status page.
func (g *Gateway) Counts() (calls, failOpen int64) {
	st := g.c.Stats()
	return st.Calls, st.FailOpen
}

// Close closes the API's client: records still queued are sent until
// ctx ends.
func (g *Gateway) Close(ctx context.Context) error { return g.c.Close(ctx) }
