package node

import (
	"context"
	"net/http"
	"time"

	"github.com/fcap-io/fcap/client"
	"github.com/fcap-io/fcap/node/httpapi"
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
	c, err := client.New(cfg)
	if err != nil {
		return err
	}
	n.apiClient = c
	n.api.Store(httpapi.New(c, httpapi.Options{MaxBody: n.cfg.APIMaxBody, Timeout: n.cfg.APITimeout}))
	return nil
}

// serveAPI answers 503 until the API's client is up.
func (n *Node) serveAPI(w http.ResponseWriter, r *http.Request) {
	a := n.api.Load()
	if a == nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte(`{"error":"starting"}` + "\n"))
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
