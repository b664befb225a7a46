package main

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/fcap-io/fcap/node"
	"github.com/fcap-io/fcap/node/security"
)

// reloader re-reads what fcapd can renew without a restart, on SIGHUP:
// the data plane's TLS certificate, key and CA bundles (--tls-*) and its
// tokens (--tokens-file). Each is loaded whole or not at all: a file that
// does not load leaves what was in place, is logged, and is counted in
// fcap_reload_errors_total{what="tls"|"tokens"}, so an alert can catch a
// renewal that did not take.
type reloader struct {
	o      *options
	log    *slog.Logger
	n      *node.Node // set once the node has started
	errors *prometheus.CounterVec
}

// newReloader returns fcapd's reloader. It gives the node a registry of
// fcapd's own (with the Go runtime's and the process's figures, as the
// node's default one has), on which the reload errors are counted too.
func newReloader(o *options, logger *slog.Logger, cfg *node.Config) *reloader {
	r := &reloader{o: o, log: logger, errors: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fcap_reload_errors_total",
		Help: "Reloads (SIGHUP) whose files did not load, by what (tls, tokens): the material loaded before stays in place.",
	}, []string{"what"})}
	for _, what := range []string{"tls", "tokens"} {
		r.errors.WithLabelValues(what) // present at 0, for alerts on increase
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), r.errors)
	cfg.Registerer, cfg.Gatherer = reg, reg
	return r
}

// run reloads everything fcapd was started with that can be reloaded.
func (r *reloader) run() {
	if r.o.tls == nil && r.o.tokensFile == "" {
		r.log.Info("reload: nothing to reload (no --tls-cert, no --tokens-file)")
		return
	}
	if r.o.tls != nil {
		if err := r.o.tls.load(); err != nil {
			r.failed("tls", "reload: TLS material kept as it was", err)
		} else {
			r.log.Info("reload: TLS certificate and CA bundles loaded", "cert", r.o.tls.cert)
		}
	}
	if r.o.tokensFile != "" {
		if err := r.tokens(); err != nil {
			r.failed("tokens", "reload: tokens kept as they were", err)
		} else {
			r.log.Info("reload: tokens loaded; connections whose token was removed are refused and closed on their next request", "file", r.o.tokensFile)
		}
	}
}

func (r *reloader) tokens() error {
	tokens, peer, err := readTokens(r.o.tokensFile)
	if err != nil {
		return err
	}
	return r.n.ReloadTokens(tokens, peer)
}

func (r *reloader) failed(what, msg string, err error) {
	r.errors.WithLabelValues(what).Inc()
	r.log.Error(msg, "err", err)
}

// readTokens reads a tokens file (security.ParseTokens). Its errors never
// quote a token.
func readTokens(path string) (map[string]security.Role, string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, "", fmt.Errorf("--tokens-file: %w", err)
	}
	defer f.Close()
	tokens, peer, err := security.ParseTokens(f)
	if err != nil {
		return nil, "", fmt.Errorf("--tokens-file %s: %w", path, err)
	}
	return tokens, peer, nil
}
