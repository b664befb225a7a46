package node

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/node/metrics"
)

// The JSON API is not the node's: it is a gateway that goes through a
// smart client of the cluster (package client/httpapi), which the node
// starts through Config.API once its data plane listens, and serves
// under /v1/ on its HTTP address. cmd/fcapd wires it in; the node never
// imports the client.

// internalClientRole is the role label on the metrics of the client the
// node's JSON API goes through (fcap_client_*, the names an ad server's
// client exports), so that no panel or alert mixes them with the ad
// servers' (deploy/grafana, deploy/prometheus).
const internalClientRole = "node-internal"

// API is the JSON API a node serves (client/httpapi's Gateway).
type API interface {
	http.Handler
	// Counts is the calls the API made to the cluster and the verdicts
	// its failure policy allowed, for the status page.
	Counts() (calls, failOpen int64)
	// Close stops the API's calls to the cluster, sending what it still
	// queues until ctx ends.
	Close(ctx context.Context) error
}

// APIEnv is what the node gives Config.API when it starts the JSON API.
// Its fields are client/httpapi's Config's, so it converts to one.
type APIEnv struct {
	// DataAddr is this node's data-plane address, to seed the API's
	// client with.
	DataAddr string
	// Timeout is Config.APITimeout.
	Timeout time.Duration
	// MaxBody is Config.APIMaxBody.
	MaxBody int64
	// Logger is the node's, for the API.
	Logger *slog.Logger
	// Registerer is the node's, wrapped so that every metric the API's
	// client registers carries the constant label role="node-internal":
	// dashboards and alerts that sum the ad
	// servers' fcap_client_* tell them from the node's own.
	Registerer prometheus.Registerer
	// TLS is how the node dials its peers (Security.PeerTLS): the API
	// reaches the nodes as any client does, over TLS when they serve it.
	TLS *tls.Config
	// Limits are the engine's: the API refuses at once what this node's
	// engine would refuse.
	Limits fcap.Limits
	// Clock and MaxClockSkew are the node's.
	Clock        func() int64
	MaxClockSkew time.Duration
	// RefusedTime counts a time ahead of Clock the API refused itself,
	// by operation ("check", "allow", "reserve", "record", "void"), with
	// the node's own refusals.
	RefusedTime func(op string)
	// Bearer and Token are set when the node requires tokens: Bearer
	// accepts an ad server's or operator's token from HTTP callers, and
	// Token is the one the API presents to the data plane. Both follow
	// the tokens file as reloaded.
	Bearer func(token string) bool
	Token  func() string
}

// startAPI starts the JSON API once the data plane listens.
func (n *Node) startAPI() error {
	if n.http == nil || !n.cfg.HTTPAPI || n.cfg.API == nil {
		return nil
	}
	ops := map[string]metrics.Op{"check": metrics.OpCheck, "allow": metrics.OpAllow, "reserve": metrics.OpReserve, "record": metrics.OpRecord, "void": metrics.OpVoid}
	env := APIEnv{
		DataAddr:     n.dataAddr,
		Timeout:      n.cfg.APITimeout,
		MaxBody:      n.cfg.APIMaxBody,
		Logger:       n.log.With("component", "httpapi"),
		Registerer:   prometheus.WrapRegistererWith(prometheus.Labels{"role": internalClientRole}, n.cfg.Registerer),
		TLS:          n.cfg.Security.PeerTLS,
		Limits:       n.cfg.Engine.Limits(),
		Clock:        n.clock,
		MaxClockSkew: n.cfg.MaxClockSkew,
		RefusedTime:  func(op string) { n.metrics.Time.Refused(ops[op]) },
	}
	if n.tokens.Required() {
		// HTTP callers present an ad server's or operator's token; the
		// API's client itself uses one too (a peer token may not check).
		env.Bearer, env.Token = n.tokens.Bearer, n.tokens.API
		if n.tokens.API() == "" {
			n.log.Warn("http api off: the tokens file has no adserver or operator token for it")
			return nil
		}
	}
	a, err := n.cfg.API(env)
	if err != nil {
		return err
	}
	n.api.Store(&a)
	return nil
}

// serveAPI answers 503 until the API is up.
func (n *Node) serveAPI(w http.ResponseWriter, r *http.Request) {
	a := n.api.Load()
	if a == nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte(`{"error":"starting","code":"starting"}` + "\n"))
		return
	}
	(*a).ServeHTTP(w, r)
}

func (n *Node) stopAPI() {
	a := n.api.Load()
	if a == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	(*a).Close(ctx)
}
