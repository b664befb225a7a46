#!/usr/bin/env bash
# scripts/bench-replication.sh: what replication costs, on this machine.
#
#   scripts/bench-replication.sh [--duration 10s] [--port-base 28700]
#
# For R=1 and R=2 it starts a 3-node fcap cluster on loopback ports (every
# node pinned to the last CPU, fcapbench to the others, as scripts/bench.sh
# does), waits until all three nodes are active members, and drives it with
# fcapbench: single Allow calls (each one a check and a write) with soft
# caps, then with strict caps (R=2 only: with R=1 there is no backup to
# wait for), and the ad-request mix. It stops only what it started.
set -euo pipefail
cd "$(dirname "$0")/.."

DUR=10s BASE=28700
. scripts/lib.sh
duration_and_ports bench-replication.sh "$@"

WORK=$(mktemp -d /tmp/fcap-repl.XXXXXX)
PIDS=()
cleanup() {
	local pid
	for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
	for pid in "${PIDS[@]}"; do
		for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
	PIDS=()
}
# FCAP_KEEP=1 keeps the nodes' logs; FCAPD_ARGS adds fcapd flags
# (FCAPD_ARGS="--anti-entropy 0", say).
if [ "${FCAP_KEEP:-}" = 1 ]; then
	trap 'cleanup; echo "logs in $WORK" >&2' EXIT
else
	trap 'cleanup; rm -rf "$WORK"' EXIT
fi
trap 'exit 130' INT TERM

go build -o "$WORK/fcapd" ./cmd/fcapd
go build -o "$WORK/fcapbench" ./cmd/fcapbench
go build -o "$WORK/fcapctl" ./cmd/fcapctl

SRV=() GEN=()
NCPU=$(nproc)
if [ "$NCPU" -ge 2 ] && command -v taskset >/dev/null; then
	SRV=(taskset -c $((NCPU - 1)))
	GEN=(taskset -c "0-$((NCPU - 2))")
fi

cluster() { # cluster R: three nodes, data on BASE+0..2
	local r=$1 i
	for i in 0 1 2; do
		local args=(--name "n$i" --replicas "$r" --data "127.0.0.1:$((BASE + i))" --gossip "127.0.0.1:$((BASE + 40 + i))"
			--http "127.0.0.1:$((BASE + 80 + i))" --gossip-profile local --log-level warn ${FCAPD_ARGS:-})
		[ "$i" -gt 0 ] && args+=(--join "127.0.0.1:$((BASE + 40))")
		"${SRV[@]}" "$WORK/fcapd" "${args[@]}" >"$WORK/n$i.log" 2>&1 &
		PIDS+=($!)
	done
	for _ in $(seq 300); do
		if [ "$("$WORK/fcapctl" status --addr "127.0.0.1:$BASE" 2>/dev/null | grep -c ' active ')" = 3 ]; then
			return 0
		fi
		sleep 0.1
	done
	echo "bench-replication.sh: the cluster never had 3 active members; logs in $WORK" >&2
	cat "$WORK"/n*.log >&2
	exit 1
}

run() { # run LABEL ARGS...
	local label=$1
	shift
	printf '%-28s ' "$label"
	"${GEN[@]}" "$WORK/fcapbench" --addr "127.0.0.1:$BASE,127.0.0.1:$((BASE + 1)),127.0.0.1:$((BASE + 2))" \
		--duration "$DUR" --quiet "$@" | tail -1
}

for r in 1 2; do
	cluster "$r"
	run "R=$r allow soft" --workload allow --mode soft
	[ "$r" -gt 1 ] && run "R=$r allow strict" --workload allow --mode strict
	run "R=$r mix soft" --workload mix --mode soft
	[ "$r" -gt 1 ] && run "R=$r mix strict" --workload mix --mode strict
	cleanup
done
