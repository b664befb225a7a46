// Command adserver is a minimal ad server embedding the fcap client: for
// each ad request it checks every candidate's caps in one call, serves
// the first allowed one, and reports the impression when it "plays".
//
//	go run ./cmd/fcapd &                       # a one-node fcap on loopback
//	go run ./examples/adserver                  # listens on 127.0.0.1:8080
//	curl '127.0.0.1:8080/ad?viewer=u42'         # repeat: after 3 a creative is capped
//
// Campaign caps are soft (an overshoot of one impression after a node
// crash is acceptable); the "premium" advertiser's cap is strict, because
// its overshoot is billed: when fcap cannot answer in time, its ads are
// not served (fail closed) while the others are (fail open).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"sync/atomic"
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

var (
	hour = int64(time.Hour / time.Millisecond)
	day  = 24 * hour
)

// inventory: a few creatives of two campaigns of two advertisers.
func inventory() []ad {
	campaign := func(id string, perDay int64) fcap.Cap {
		return fcap.Cap{Scope: "campaign", ID: id, Limit: perDay, Window: day}
	}
	creative := func(id string, perHour int64) fcap.Cap {
		return fcap.Cap{Scope: "creative", ID: id, Limit: perHour, Window: hour}
	}
	premium := fcap.Cap{Scope: "advertiser", ID: "premium", Limit: 2, Window: day, Mode: fcap.Strict}
	return []ad{
		{"premium-video", []fcap.Cap{creative("premium-video", 1), campaign("premium-launch", 5), premium}},
		{"premium-banner", []fcap.Cap{creative("premium-banner", 2), campaign("premium-launch", 5), premium}},
		{"shoes-banner", []fcap.Cap{creative("shoes-banner", 3), campaign("shoes-sale", 10)}},
		{"shoes-video", []fcap.Cap{creative("shoes-video", 3), campaign("shoes-sale", 10)}},
	}
}

func main() {
	seeds := flag.String("fcap", "127.0.0.1:7700", "fcap nodes (data-plane addresses), comma-separated")
	listen := flag.String("listen", "127.0.0.1:8080", "where this ad server listens")
	flag.Parse()

	reg := prometheus.NewRegistry()
	cfg := client.DefaultConfig(*seeds)
	cfg.Timeout = 5 * time.Millisecond // the ad decision's budget for capping
	cfg.Registerer = reg               // fcap_client_* on this server's /metrics
	fc, err := client.New(cfg)
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	if err := fc.WaitReady(ctx); err != nil {
		log.Printf("fcap not reachable yet (%v): serving anyway, caps fail open until it is", err)
	}
	cancel()

	ads := inventory()
	cands := make([]fcap.Candidate, len(ads))
	for i, a := range ads {
		cands[i] = fcap.Candidate{Caps: a.Caps}
	}
	var impressions atomic.Int64

	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /ad", func(w http.ResponseWriter, r *http.Request) {
		viewer := r.URL.Query().Get("viewer")
		if viewer == "" {
			http.Error(w, "viewer is required", http.StatusBadRequest)
			return
		}
		// One call for every candidate; err only for an invalid request.
		res, err := fc.Check(r.Context(), viewer, cands)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		for i, v := range res.Verdicts {
			if !v.Allowed {
				continue
			}
			// The ad plays: report the impression (queued, batched,
			// retried; idempotent on its id).
			id := viewer + "-" + strconv.FormatInt(impressions.Add(1), 10) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
			fc.Record(viewer, fcap.Impression{ID: id, Time: time.Now().UnixMilli(), Caps: ads[i].Caps})
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(map[string]any{
				"creative": ads[i].Creative, "remaining": v.Remaining,
				"fail_open": v.FailOpen, "stale": v.Stale,
			})
			return
		}
		w.WriteHeader(http.StatusNoContent) // every candidate is capped: no ad
	})

	srv := &http.Server{Addr: *listen, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		stop := make(chan os.Signal, 1)
		signal.Notify(stop, os.Interrupt)
		<-stop
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		fc.Close(ctx) // sends the impressions still queued
	}()
	fmt.Printf("ad server on http://%s/ad?viewer=ID (fcap at %s)\n", *listen, *seeds)
	if err := srv.ListenAndServe(); err != http.ErrServerClosed {
		log.Fatal(err)
	}
}
