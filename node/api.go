package node

import (
	"context"
	"net/http"
	"time"

	"github.com/fcap-io/fcap/client"
	"github.com/fcap-io/fcap/node/httpapi"
	"github.com/fcap-io/fcap/node/metrics"
)

// The JSON API (package httpapi) goes through a smart client of the
// cluster, seeded with this node: a request for a viewer this node does
// not own is sent to its owner in one hop, with the Go client's deadlines,
// backup reads and failure policy.

// startAPI starts the API's client once the data plane listens.
func (n *Node) startAPI() error {
	if n.http == nil || !n.cfg.HTTPAPI {
		return nil
	}
	cfg := client.DefaultConfig(n.dataAddr)
	cfg.Timeout = n.cfg.APITimeout
	cfg.Logger = n.log.With("component", "httpapi")
	cfg.Registerer = n.cfg.Registerer
	// The API's client reaches the nodes as any client does: over TLS
	// when they serve it, and with tokens when they require them.
	cfg.TLS = n.cfg.Security.PeerTLS
	// The API refuses at once what this node's engine would refuse.
	cfg.Limits = n.cfg.Engine.Limits()
	opts := httpapi.Options{MaxBody: n.cfg.APIMaxBody, Timeout: n.cfg.APITimeout, Clock: n.clock, MaxClockSkew: n.cfg.MaxClockSkew}
	ops := map[string]metrics.Op{"check": metrics.OpCheck, "allow": metrics.OpAllow, "reserve": metrics.OpReserve, "record": metrics.OpRecord, "void": metrics.OpVoid}
	opts.RefusedTime = func(op string) { n.metrics.Time.Refused(ops[op]) }
	if n.tokens.Required() {
		// HTTP callers present an ad server's or operator's token; the
		// client itself uses one too (a peer token may not check). Both
		// follow the table as reloaded.
		opts.Bearer, cfg.TokenFunc = n.tokens.Bearer, n.tokens.API
		if n.tokens.API() == "" {
			n.log.Warn("http api off: the tokens file has no adserver or operator token for it")
			return nil
		}
	}
	c, err := client.New(cfg)
	if err != nil {
		return err
	}
	n.apiClient = c
	n.api.Store(httpapi.New(c, opts))
	return nil
}

// serveAPI answers 503 until the API's client is up.
func (n *Node) serveAPI(w http.ResponseWriter, r *http.Request) {
	a := n.api.Load()
	if a == nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte(`{"error":"starting","code":"starting"}` + "\n"))
		return
	}
	a.ServeHTTP(w, r)
}

func (n *Node) stopAPI() {
	if n.apiClient == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	n.apiClient.Close(ctx)
}
