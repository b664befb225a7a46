package node

import (
	"net/http"
	"net/http/pprof"

	"github.com/prometheus/client_golang/prometheus/promhttp"
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
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if why := n.notReady(); why != "" {
			http.Error(w, "not ready: "+why, http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ready\n"))
	})
	mux.HandleFunc("GET /{$}", n.serveStatusPage)
	if n.cfg.HTTPAPI {
		mux.HandleFunc("/v1/", n.serveAPI)
	}
	if n.cfg.Pprof {
		// Off by default: profiles expose internals and cost CPU.
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return n.metrics.http.wrap(mux)
}
