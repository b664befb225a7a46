// Command adserver is a minimal ad server embedding the fcap client. For
// each ad request it checks every candidate's caps in one call, reserves
// the first allowed candidate (one impression's worth of each of its caps,
// atomically), serves it, and records the impression that confirms the
// reservation when the ad plays.
//
//	go run ./cmd/fcapd &                       # a one-node fcap on loopback
//	go run ./examples/adserver                  # listens on 127.0.0.1:8080
//	curl '127.0.0.1:8080/ad?viewer=u42'         # repeat: after 3 a creative is capped
//
// Why Check, then Reserve, then Record: Check answers for every candidate
// in one hop but holds nothing, so two requests of one viewer at the same
// moment would both see the last impression free. Reserve takes it for
// one of them (the other is denied and tries its next candidate), so no
// cap is ever exceeded, however many requests a viewer sends at once; the
// Record that names the reservation turns it into the impression. A
// reservation whose ad never plays expires after reservationTTL.
//
// Campaign and creative caps are soft: when fcap cannot answer in time
// their ads are served anyway (fail open; an overshoot of an impression or
// two is acceptable). The "premium" advertiser's cap is strict, because
// its overshoot is billed: when fcap cannot answer, its ads are not served
// (fail closed).
//
// SIGINT or SIGTERM stops the server: it finishes the requests in flight,
// then closes the client, which sends the impressions still queued, and
// only then exits.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/client"
)

// ad is one candidate with the caps it is subject to.
type ad struct {
	Creative string
	Caps     []fcap.Cap
}

// reservationTTL is how long a served ad has to play before its
// reservation lapses and the impression it held is free again.
const reservationTTL = 30 * time.Second

// inventory: a few creatives of two campaigns of two advertisers.
func inventory() []ad {
	campaign := func(id string, perDay int64) fcap.Cap {
		return fcap.Cap{Scope: "campaign", ID: id, Limit: perDay, Window: 24 * time.Hour}
	}
	creative := func(id string, perHour int64) fcap.Cap {
		return fcap.Cap{Scope: "creative", ID: id, Limit: perHour, Window: time.Hour}
	}
	premium := fcap.Cap{Scope: "advertiser", ID: "premium", Limit: 2, Window: 24 * time.Hour, Mode: fcap.Strict}
	return []ad{
		{"premium-video", []fcap.Cap{creative("premium-video", 1), campaign("premium-launch", 5), premium}},
		{"premium-banner", []fcap.Cap{creative("premium-banner", 2), campaign("premium-launch", 5), premium}},
		{"shoes-banner", []fcap.Cap{creative("shoes-banner", 3), campaign("shoes-sale", 10)}},
		{"shoes-video", []fcap.Cap{creative("shoes-video", 3), campaign("shoes-sale", 10)}},
	}
}

// server answers ad requests.
type server struct {
	fc          *client.Client
	ads         []ad
	cands       []fcap.Candidate
	impressions atomic.Int64
	warned      atomic.Int64 // when unreached last logged, Unix nanoseconds
}

// unreached reports whether err says that fcap was never reached (a
// wrong seed, the node's HTTP port, TLS not set: the error names each
// seed and what answered there). The call's verdicts are then the
// failure policy's, and this server serves by them; it logs why at most
// every 10 seconds.
func (s *server) unreached(err error) bool {
	if !errors.Is(err, client.ErrUnavailable) {
		return false
	}
	now, last := time.Now().UnixNano(), s.warned.Load()
	if now-last > int64(10*time.Second) && s.warned.CompareAndSwap(last, now) {
		log.Printf("fcap never reached, serving by the failure policy: %v", err)
	}
	return true
}

func newServer(fc *client.Client) *server {
	s := &server{fc: fc, ads: inventory()}
	for _, a := range s.ads {
		s.cands = append(s.cands, fcap.Candidate{Caps: a.Caps})
	}
	return s
}

// served is the answer to an ad request.
type served struct {
	Creative  string `json:"creative"`
	Remaining int64  `json:"remaining"`
	FailOpen  bool   `json:"fail_open,omitempty"`
}

func (s *server) serveAd(w http.ResponseWriter, r *http.Request) {
	viewer := r.URL.Query().Get("viewer")
	if viewer == "" {
		http.Error(w, "viewer is required", http.StatusBadRequest)
		return
	}
	// One call for every candidate. An error is an invalid request or a
	// request that went away (a cancelled context): no verdict either
	// way; or fcap never reached, with the failure policy's verdicts.
	res, err := s.fc.Check(r.Context(), viewer, s.cands)
	if err != nil && !s.unreached(err) {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	for i, v := range res.Verdicts {
		if !v.Allowed {
			continue
		}
		// Hold the impression before serving. Another request of this
		// viewer may have taken the last one since the Check: then this
		// one is denied, and the next candidate is tried.
		v, rsv, err := s.fc.Reserve(r.Context(), viewer, s.cands[i], reservationTTL)
		if err != nil && !s.unreached(err) {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		if !v.Allowed {
			continue // taken meanwhile, or fcap did not answer and a strict cap fails closed
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(served{Creative: s.ads[i].Creative, Remaining: v.Remaining, FailOpen: v.FailOpen})

		// The ad plays (here, at once; a real player reports it later,
		// with the reservation id): record the impression. It confirms
		// the reservation (rsv.ID is 0 for a verdict decided by the
		// failure policy: the impression is then simply counted). Record
		// is queued, batched and retried, and idempotent on the id.
		id := viewer + "-" + strconv.FormatInt(s.impressions.Add(1), 10) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
		imp := fcap.Impression{ID: id, Caps: s.ads[i].Caps, Reservation: rsv.ID} // Time 0: now
		// Unreached: queued all the same.
		if err := s.fc.Record(viewer, imp); err != nil && !s.unreached(err) {
			log.Printf("impression %s not recorded: %v", id, err)
		}
		return
	}
	w.WriteHeader(http.StatusNoContent) // every candidate is capped: no ad
}

func main() {
	seeds := flag.String("fcap", "127.0.0.1:7700", "fcap nodes (data-plane addresses), comma-separated")
	listen := flag.String("listen", "127.0.0.1:8080", "where this ad server listens")
	timeout := flag.Duration("timeout", 5*time.Millisecond, "the ad decision's budget for each fcap call")
	flag.Parse()
	if err := run(*seeds, *listen, *timeout); err != nil {
		log.Fatal(err)
	}
}

func run(seeds, listen string, timeout time.Duration) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	reg := prometheus.NewRegistry()
	fc, err := client.New(client.Config{
		Seeds:      strings.Split(seeds, ","),
		Timeout:    timeout, // every other field: its default
		Registerer: reg,     // fcap_client_* on this server's /metrics
	})
	if err != nil {
		return err
	}
	// Wait for every fcap node that owns partitions to be connected, so
	// the first ad request is served like the thousandth. If they are
	// not by then, the error names each seed and what answered there
	// (nothing, an HTTP server, TLS, another protocol). This server
	// serves anyway (soft caps fail open, strict caps fail closed, and
	// each call says fcap was never reached until it is); one that must
	// not would return the error.
	ready, cancel := context.WithTimeout(ctx, 5*time.Second)
	if err := fc.WaitReady(ready); err != nil {
		log.Printf("fcap not ready, serving by the failure policy until it is: %v", err)
	}
	cancel()

	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /ad", newServer(fc).serveAd)
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		fc.Close(context.Background())
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	fmt.Printf("ad server on http://%s/ad?viewer=ID (fcap at %s)\n", ln.Addr(), seeds)

	select {
	case err = <-served: // the listener failed
	case <-ctx.Done():
		log.Print("stopping: finishing requests in flight, then sending queued impressions")
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if serr := srv.Shutdown(shutdown); serr != nil && err == nil {
		err = serr
	}
	// Close after Shutdown: no handler can Record any more, and Close
	// waits until the queue is sent (or the deadline passes).
	if cerr := fc.Close(shutdown); cerr != nil && err == nil {
		err = fmt.Errorf("impressions left unsent: %w", cerr)
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}
