package metrics

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// HTTP metrics: every request to the HTTP address (the JSON API, the
// probes, /metrics, the status page), by route and status code, and its
// latency by route. Routes are the fixed list the status page shows
// (statuspage.Endpoints); anything else is "other", so a scanner cannot grow the
// label set.

// HTTP counts and times the requests to the HTTP address.
type HTTP struct {
	routes   []string
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
}

func newHTTP(reg prometheus.Registerer, routes []string) (*HTTP, error) {
	m := &HTTP{
		routes: routes,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fcap_http_requests_total",
			Help: "Requests to the HTTP address (JSON API, health, metrics, status page), by route and status code; unknown paths count as route \"other\".",
		}, []string{"route", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "fcap_http_request_duration_seconds",
			Help:    "Time to answer a request to the HTTP address, by route (JSON API calls include the cluster round trip).",
			Buckets: []float64{1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 5e-2, 0.1, 0.25, 1},
		}, []string{"route"}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.latency} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	// Every route's series exist from the start, at 0, so rates and
	// ratios have a base before the first request.
	for _, r := range routes {
		m.requests.WithLabelValues(r, "200")
		m.latency.WithLabelValues(r)
	}
	return m, nil
}

// route names the route of a path for the metrics' labels.
func (m *HTTP) route(path string) string {
	for _, r := range m.routes {
		if path == r || strings.HasSuffix(r, "/") && r != "/" && strings.HasPrefix(path, r) {
			return r
		}
	}
	return "other"
}

// Wrap counts and times each request next answers.
func (m *HTTP) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		next.ServeHTTP(sw, r)
		route := m.route(r.URL.Path)
		m.requests.WithLabelValues(route, strconv.Itoa(sw.code)).Inc()
		m.latency.WithLabelValues(route).Observe(time.Since(start).Seconds())
	})
}

// statusWriter remembers the status code written.
type statusWriter struct {
	http.ResponseWriter
	code  int
	wrote bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.code, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
