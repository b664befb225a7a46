package node

import (
	"io"
	"net/http"
	"net/http/pprof"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/fcap-io/fcap/docs"
	"github.com/fcap-io/fcap/node/metrics"
	"github.com/fcap-io/fcap/node/statuspage"
	"github.com/fcap-io/fcap/proto"
	"github.com/fcap-io/fcap/ring"
)

// httpHandler serves metrics and health for operators and load balancers.
func (n *Node) httpHandler() http.Handler {
	mux := http.NewServeMux()
	if n.cfg.Gatherer != nil {
		mux.Handle("GET /metrics", promhttp.HandlerFor(n.cfg.Gatherer, promhttp.HandlerOpts{}))
	}
	// /healthz: the process is alive and serving HTTP.
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte("ok\n"))
	})
	// /readyz: the node is an active member of its ring and not draining.
	// It serves soft caps whatever the member set says, so a failed
	// member or a lost majority does not make it unready; the body names
	// them. /readyz?strict also asks for a majority (strict caps).
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if why := n.notReady(); why != "" {
			http.Error(w, "not ready: "+why, http.StatusServiceUnavailable)
			return
		}
		notes := n.authorityNotes()
		if note := copiesNote(n.Ring()); note != "" {
			notes += "warning: " + note + "\n"
		}
		if r.URL.Query().Has("strict") && !n.Authority() {
			http.Error(w, "not ready for strict caps\n"+notes, http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ready\n" + notes))
	})
	mux.Handle("GET /{$}", n.page)
	if n.cfg.HTTPAPI && n.cfg.API != nil {
		mux.HandleFunc("/v1/", n.serveAPI)
		// The API's contract, docs/openapi.yaml, as built in: a client
		// generator can point at a live node.
		mux.HandleFunc("GET /openapi.yaml", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/yaml")
			io.WriteString(w, docs.OpenAPI())
		})
	}
	if n.cfg.Pprof {
		// Off by default: profiles expose internals and cost CPU.
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return n.metrics.HTTP.Wrap(mux)
}

// pageSource is the node as its status page reads it.
type pageSource struct{ n *Node }

func (s pageSource) Name() string          { return s.n.cfg.Name }
func (s pageSource) Ring() *ring.Ring      { return s.n.Ring() }
func (s pageSource) Status() *proto.Status { return s.n.status() }

func (s pageSource) Counters() statuspage.Counters {
	m := s.n.metrics
	c := statuspage.Counters{
		SyncRefusals:   int64(m.SyncingRefusals.Value()),
		BackupReads:    int64(m.BackupReads.Value()),
		StrictFailures: int64(m.StrictFailures.Value()),
	}
	if a := s.n.api.Load(); a != nil {
		c.APICalls, c.APIFailOpen = (*a).Counts()
	}
	return c
}

// metricsSource is the node as its collectors read it at scrape time.
type metricsSource struct{ n *Node }

func (s metricsSource) Name() string { return s.n.cfg.Name }

func (s metricsSource) View() (*ring.Ring, bool) {
	v := s.n.view.Load()
	return v.ring, v.in
}

func (s metricsSource) SelfState() ring.State { return s.n.membership().Self().State }

func (s metricsSource) Authority() metrics.Authority { return s.n.authorityState() }

func (s metricsSource) Replication() metrics.Replication {
	q, lag := s.n.repl.Queued()
	return metrics.Replication{Queue: q, Lag: lag, Handing: s.n.repl.Handing(),
		UnderReplicated: s.n.repl.UnderReplicated(), Syncing: s.n.repl.SyncingCount(s.n.view.Load().ring)}
}
