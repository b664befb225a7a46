// Command fcapd runs an fcap node.
//
// With no flags it starts a one-node cluster on loopback: the data plane
// on 127.0.0.1:7700, gossip on 127.0.0.1:7946 and HTTP (metrics, health)
// on 127.0.0.1:7780. Joining a running cluster is one flag:
//
//	fcapd --name n2 --data 127.0.0.1:7701 --gossip 127.0.0.1:7947 --http 127.0.0.1:7781 --join 127.0.0.1:7946
//
// Every flag can also be set with an FCAP_* environment variable (the
// flag wins). Run "fcapd -h" for the list.
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/fcap-io/fcap/internal/logging"
	"github.com/fcap-io/fcap/node"
	"github.com/fcap-io/fcap/node/buildinfo"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	opts, err := parseFlags(args, os.Getenv, stderr)
	if err != nil {
		switch err {
		case errHelp:
			return 0
		case errVersion:
			fmt.Fprintln(stdout, "fcapd "+buildinfo.Get().String())
			return 0
		}
		fmt.Fprintf(stderr, "fcapd: %v\n", err)
		return 2
	}
	logger, err := logging.New(stderr, opts.logLevel, opts.logFormat)
	if err != nil {
		fmt.Fprintf(stderr, "fcapd: %v\n", err)
		return 2
	}
	cfg, err := opts.config(logger)
	if err != nil {
		fmt.Fprintf(stderr, "fcapd: %v\n", err)
		return 2
	}
	if err := installGossipFaults(&cfg, os.Getenv, slog.NewLogLogger(logger.Handler(), slog.LevelWarn)); err != nil {
		fmt.Fprintf(stderr, "fcapd: %v\n", err)
		return 2
	}
	if opts.goMemLimit > 0 {
		// Let the GC work harder before the process nears its memory.
		debug.SetMemoryLimit(opts.goMemLimit)
	}
	startGCFloor(gcFloorBytes, os.LookupEnv)
	logger.Info("starting fcapd", "version", buildinfo.Get().Version, "revision", buildinfo.Get().Revision, "name", cfg.Name, "memory_limit", cfg.Engine.MemoryLimit,
		"storage", opts.durable.describe())
	reload := newReloader(opts, logger, &cfg)
	n, err := node.Start(cfg)
	if err != nil {
		logger.Error("start", "err", err)
		return 1
	}
	reload.n = n
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	code := 0
wait:
	for {
		select {
		case s := <-sig:
			if s == syscall.SIGHUP {
				reload.run()
				continue
			}
			logger.Info("stopping", "signal", s.String(), "timeout", opts.shutdownTimeout)
			break wait
		case <-n.Drained():
			// fcapctl drain: the node handed its partitions over and left
			// the cluster. Nothing is left for the process to do; the
			// shutdown below returns the drain's result (an incomplete
			// hand-over exits 1, as it does after SIGTERM).
			logger.Info("drained: left the cluster, exiting; start fcapd again to rejoin")
			break wait
		case taken := <-n.NameTaken():
			// One line that says what to do; the node owns nothing yet.
			logger.Error("fcapd: refusing to start: " + taken.Error())
			code = exitNameTaken
			break wait
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), opts.shutdownTimeout)
	defer cancel()
	if err := n.Shutdown(ctx); err != nil {
		logger.Error("shutdown", "err", err)
		return 1
	}
	return code
}

// fcapd's exit statuses: 0 stopped by a signal or drained (fcapctl drain:
// it exits once its drain is done), 1 a failure to start or stop (a
// hand-over that did not complete included), 2 bad flags or
// configuration, exitNameTaken another live member of the cluster
// already has this node's --name.
const exitNameTaken = 3
