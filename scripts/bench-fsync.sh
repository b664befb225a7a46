#!/usr/bin/env bash
# scripts/bench-fsync.sh: what the durable log costs writes, over the network.
#
#   scripts/bench-fsync.sh [--duration 10s] [--port-base 27700]
#
# For each storage setting (memory only, then --data-dir with --fsync
# never, interval and always) it starts one fcapd on loopback ports with a
# fresh data dir, drives it with fcapbench's single Allow calls (each one a
# check and a write that the node logs), 64 callers, and prints fcapbench's
# line and the bytes the data dir grew to. It stops only what it started.
set -euo pipefail
cd "$(dirname "$0")/.."

DUR=10s BASE=27700
. scripts/lib.sh
duration_and_ports bench-fsync.sh "$@"

WORK=$(mktemp -d /tmp/fcap-fsync.XXXXXX)
PID=""
cleanup() {
	[ -n "$PID" ] && kill -TERM "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
	rm -rf "$WORK"
}
trap cleanup EXIT
go build -o "$WORK/bin/" ./cmd/fcapd ./cmd/fcapbench

for storage in memory never interval always; do
	data="$WORK/data-$storage"
	args=(--name bench --data "127.0.0.1:$BASE" --gossip "127.0.0.1:$((BASE + 1))" --http "127.0.0.1:$((BASE + 2))")
	[ "$storage" != memory ] && args+=(--data-dir "$data" --fsync "$storage")
	"$WORK/bin/fcapd" "${args[@]}" >"$WORK/fcapd-$storage.log" 2>&1 &
	PID=$!
	for _ in $(seq 100); do
		curl -sf "127.0.0.1:$((BASE + 2))/readyz" >/dev/null && break
		sleep 0.1
	done
	"$WORK/bin/fcapbench" --addr "127.0.0.1:$BASE" --workload allow --concurrency 64 --duration "$DUR" --warmup 2s \
		--quiet --name "storage-$storage" | sed -n "$([ "$storage" = memory ] && echo 1,2p || echo 2p)"
	kill -TERM "$PID"
	wait "$PID" || true
	PID=""
	[ "$storage" != memory ] && echo "  data dir after the run: $(du -sb "$data" | cut -f1) bytes"
done
