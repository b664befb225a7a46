#!/usr/bin/env bash
# scripts/bench-floor.sh: fcap beside the machine's floor, the baseline of
# issue 21. One fcapd (all defaults), 100-candidate checks, the client's
# default config (5 ms deadline, 4.5 ms cut-off), open loop at 2,000/s and
# at half of the peak measured just before (closed loop, 64 callers, 50 ms
# deadline); each run interleaves a bare
# echo server (fcapbench echo-server, the floor) with fcap in rounds at the
# same pacing. Every configuration runs --runs times; the medians are
# printed as markdown tables (fcapbench floor-median).
#
#   scripts/bench-floor.sh                       # 3 runs of each, ~8 minutes
#   scripts/bench-floor.sh --runs 1 --duration 5s   # a quick look
#
# With two or more CPUs, fcapd and the echo server are pinned to the last
# CPU and fcapbench to the others (taskset), as the issue measured.
#
# Options:
#   --runs N        runs of each configuration (default 3)
#   --duration D    measured time per run, split between the rounds (default 20s)
#   --rounds N      echo/fcap rounds per run (default 5)
#   --out DIR       where the JSON and outputs go (default a temp dir, kept)
#   --nodes N       fcapd nodes, replicas min(N, 2) (default 1); all pinned
#                   to the servers' CPU, fcapbench given the first. With
#                   N > 1 every round has a second floor between the echo
#                   and fcap: N echo processes on the same CPU, each call
#                   sent whole to the one its viewer hashes to, as the
#                   client sends a check to its viewer's owner (fcapbench
#                   --echo-procs N); the tables gain "echo xN" columns
#                   beside the one-process echo's, and each run takes a
#                   third longer
#   --port-base N   loopback ports N..N+80+N (default 37700)
#   --target T      fcap (default), or raw: the node driven by the echo's
#                   caller with one prebuilt check (fcapbench --target raw),
#                   its p99 over the echo's is the node's share, fcap's over
#                   raw's the client's; one node only (raw asks the first)
#   --prepared      fcap: the client checks candidates prepared once per
#                   campaign (fcapbench --prepared, CheckPreparedInto), in
#                   the peak run and the floor runs alike
#   --echo-work D   the floor does work: its echo server spends D of CPU on
#                   each request before answering (fcapbench --echo-work);
#                   with --echo-caller-work D, its caller D per call before
#                   sending. Set to fcap's CPU per check over the bare
#                   echo's (docs/bench/BENCHMARKS.md), it is the floor of a server
#                   doing fcap's work
#   --echo-caller-work D  see --echo-work
#   --max-steal P   a run in which the hypervisor took more than P percent
#                   of the host's CPUs (fcapbench's steal) is disturbed: it
#                   is kept apart (NAME.disturbed-K.json) and run again, and
#                   left out of the medians (default 1; 100 keeps them all)
#   --retries N     times a disturbed run is run again (default 2); one
#                   still disturbed after them is named beside the medians
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS=3 DURATION=20s ROUNDS=5 OUT="" BASE=37700 NODES=1 TARGET=fcap PREPARED=() MAXSTEAL=1 RETRIES=2 WORK=()
while [ $# -gt 0 ]; do
	case "$1" in
	--runs) RUNS=$2; shift ;;
	--duration) DURATION=$2; shift ;;
	--rounds) ROUNDS=$2; shift ;;
	--out) OUT=$2; shift ;;
	--port-base) BASE=$2; shift ;;
	--nodes) NODES=$2; shift ;;
	--target) TARGET=$2; shift ;;
	--prepared) PREPARED=(--prepared) ;;
	--max-steal) MAXSTEAL=$2; shift ;;
	--retries) RETRIES=$2; shift ;;
	--echo-work | --echo-caller-work) WORK+=("$1" "$2"); shift ;;
	-h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) echo "bench-floor.sh: unknown option $1 (try --help)" >&2; exit 2 ;;
	esac
	shift
done
[ "$TARGET" = fcap ] || [ "$TARGET" = raw ] || { echo "bench-floor.sh: --target must be fcap or raw" >&2; exit 2; }
[ "$TARGET" = fcap ] || [ ${#PREPARED[@]} -eq 0 ] || { echo "bench-floor.sh: --prepared is for --target fcap" >&2; exit 2; }
[ "$TARGET" = fcap ] || [ "$NODES" -eq 1 ] || { echo "bench-floor.sh: --target raw asks one node: give --nodes 1" >&2; exit 2; }
[ -n "$OUT" ] || OUT=$(mktemp -d /tmp/fcap-floor.XXXXXX)
mkdir -p "$OUT"

log() { printf '== %s\n' "$*" >&2; }

log "building fcapd and fcapbench into $OUT"
go build -o "$OUT/fcapd" ./cmd/fcapd
go build -o "$OUT/fcapbench" ./cmd/fcapbench

SRV=() GEN=() ECHO_CPUS=()
NCPU=$(nproc)
if [ "$NCPU" -ge 2 ] && command -v taskset >/dev/null; then
	LAST=$((NCPU - 1))
	SRV=(taskset -c "$LAST")
	GEN=(taskset -c "0-$((LAST - 1))")
	ECHO_CPUS=(--echo-cpus "$LAST")
fi

PIDS=()
cleanup() {
	for pid in "${PIDS[@]}"; do
		kill -TERM "$pid" 2>/dev/null || true
	done
	for pid in "${PIDS[@]}"; do
		wait "$pid" 2>/dev/null || true
	done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

REPLICAS=$(( NODES < 2 ? 1 : 2 ))
for n in $(seq 0 $((NODES - 1))); do
	join=()
	[ "$n" -eq 0 ] || join=(--join "127.0.0.1:$((BASE + 40))")
	"${SRV[@]}" "$OUT/fcapd" --name "floor$n" --data "127.0.0.1:$((BASE + n))" --gossip "127.0.0.1:$((BASE + 40 + n))" \
		--http "127.0.0.1:$((BASE + 80 + n))" --replicas "$REPLICAS" --gossip-profile local --log-level warn "${join[@]}" \
		>"$OUT/fcapd$n.log" 2>&1 &
	PIDS+=($!)
done
ready() {
	# Every node ready and, with more than one, each seeing all of them.
	for n in $(seq 0 $((NODES - 1))); do
		curl -sf "http://127.0.0.1:$((BASE + 80 + n))/readyz" >/dev/null 2>&1 || return 1
		[ "$NODES" -eq 1 ] && continue
		active=$(curl -sf "http://127.0.0.1:$((BASE + 80 + n))/metrics" 2>/dev/null | grep '^fcap_ring_members{state="active"}' | awk '{print $2}')
		syncing=$(curl -sf "http://127.0.0.1:$((BASE + 80 + n))/metrics" 2>/dev/null | grep '^fcap_partitions_syncing ' | awk '{print $2}')
		[ "${active:-0}" = "$NODES" ] && [ "${syncing:-1}" = "0" ] || return 1
	done
}
for _ in $(seq 600); do
	ready && break
	sleep 0.1
done
ready || { echo "bench-floor.sh: the $NODES fcapd never became ready; see $OUT/fcapd*.log" >&2; exit 1; }

COMMON=(--target "$TARGET" --addr "127.0.0.1:$BASE" --workload check --candidates 100 --timeout 5ms --floor --floor-rounds "$ROUNDS"
	--echo-procs "$NODES" "${ECHO_CPUS[@]}" --duration "$DURATION" --warmup 2s --quiet "${PREPARED[@]}" "${WORK[@]}")
# run_once CFG I: one run of CFG (its peak first, for halfpeak), its output
# and JSON as $OUT/CFG-I.*.
run_once() {
	local cfg=$1 i=$2 rate=2000 peak
	if [ "$cfg" = halfpeak ]; then
		# The peak with fcapbench's default 50 ms deadline: with 5 ms, a
		# saturated node makes the client fail open at once, which is no
		# measure of what the node serves.
		log "peak, run $i of $RUNS ($(uptime | sed 's/.*load/load/'))"
		"${GEN[@]}" "$OUT/fcapbench" --addr "127.0.0.1:$BASE" --workload check --candidates 100 --duration 10s --warmup 2s --quiet "${PREPARED[@]}" \
			--json "$OUT/peak-$i.json" >"$OUT/peak-$i.out" 2>&1
		peak=$(grep -m1 '"requests_per_second"' "$OUT/peak-$i.json" | tr -dc '0-9.')
		rate=$(awk -v p="$peak" 'BEGIN { printf "%d", p / 2 }')
	fi
	log "$cfg at $rate/s, run $i of $RUNS ($(uptime | sed 's/.*load/load/'))"
	echo "$ ${GEN[*]} fcapbench ${COMMON[*]} --rate $rate --json $OUT/$cfg-$i.json" >"$OUT/$cfg-$i.out"
	uptime >>"$OUT/$cfg-$i.out"
	"${GEN[@]}" "$OUT/fcapbench" "${COMMON[@]}" --rate "$rate" --json "$OUT/$cfg-$i.json" >>"$OUT/$cfg-$i.out" 2>&1
	uptime >>"$OUT/$cfg-$i.out"
}

for cfg in rate2000 halfpeak; do
	files=()
	for i in $(seq "$RUNS"); do
		for k in $(seq 0 "$RETRIES"); do
			run_once "$cfg" "$i"
			# floor-median exits 3 when the one run it is given is disturbed.
			st=0
			"$OUT/fcapbench" floor-median --max-steal "$MAXSTEAL" "$OUT/$cfg-$i.json" >/dev/null 2>"$OUT/$cfg-$i.steal" || st=$?
			[ "$st" -eq 3 ] || break
			log "$cfg run $i disturbed: $(cat "$OUT/$cfg-$i.steal")"
			[ "$k" -lt "$RETRIES" ] || break # the last try stays, for the medians to name
			for ext in json out; do
				mv "$OUT/$cfg-$i.$ext" "$OUT/$cfg-$i.disturbed-$k.$ext"
			done
			[ "$cfg" != halfpeak ] || mv "$OUT/peak-$i.json" "$OUT/peak-$i.disturbed-$k.json"
		done
		rm -f "$OUT/$cfg-$i.steal"
		files+=("$OUT/$cfg-$i.json")
	done
	echo "### $cfg"
	st=0
	"$OUT/fcapbench" floor-median --max-steal "$MAXSTEAL" "${files[@]}" || st=$?
	[ "$st" -eq 0 ] || [ "$st" -eq 3 ] || exit "$st"
	echo
done
log "every run's output and JSON: $OUT"
