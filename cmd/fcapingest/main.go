// Command fcapingest feeds an fcap cluster from Kafka: it consumes
// impression topics in a consumer group and records every impression
// through the fcap client, committing a partition's offset only once the
// cluster acknowledged every impression before it (at least once; a
// replay counts once). See client/ingest for the record schema and
// deploy/README.md for running it and rebuilding a cluster from a topic.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/fcap-io/fcap/client"
	"github.com/fcap-io/fcap/client/ingest"
	"github.com/fcap-io/fcap/internal/logging"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "fcapingest:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	o, err := parseFlags(args, os.Getenv, os.Stderr)
	if err != nil {
		return err
	}
	logger, err := logging.New(os.Stderr, o.logLevel, o.logFormat)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	o.client.Logger, o.client.Registerer = logger, reg
	o.ingest.Logger, o.ingest.Registerer = logger, reg

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	cl, err := client.New(o.client)
	if err != nil {
		return err
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		cl.Close(ctx)
	}()
	in, err := ingest.New(o.ingest, cl)
	if err != nil {
		return err
	}

	ln, err := net.Listen("tcp", o.http)
	if err != nil {
		return fmt.Errorf("--http: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan struct{})
	go func() {
		defer close(served)
		srv.Serve(ln)
	}()
	defer func() {
		srv.Close()
		<-served
	}()

	logger.Info("fcapingest ready", "http", ln.Addr().String(), "brokers", o.ingest.Brokers, "topics", o.ingest.Topics, "seeds", o.client.Seeds)
	return in.Run(ctx)
}
