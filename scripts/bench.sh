#!/usr/bin/env bash
# scripts/bench.sh: fcap side by side with Redis on this machine, one command.
#
#   scripts/bench.sh            # the full suite (~12 minutes on 2 vCPUs)
#   scripts/bench.sh --quick    # a ~2 minute smoke run of every step
#
# It installs redis-server with apt-get when it is missing, builds fcapd and
# fcapbench, starts every target on private loopback ports (fcap 1 node and
# 3 nodes, Redis standalone, a 3-master Redis Cluster, and empty servers for
# the memory figures), runs `fcapbench suite`, and stops only what it
# started (by PID, on exit). It leaves results.json, report.md and PNG
# charts in the output directory and, for a full run, appends the report to
# docs/bench/BENCHMARKS.md.
#
# With two or more CPUs every server is pinned to the last CPU and
# fcapbench to the others (taskset), so each system under test gets one
# core and the load generator never competes with it (--no-pin turns that
# off).
#
# Options:
#   --quick        short runs and a small memory load; report in /tmp, docs/bench/BENCHMARKS.md untouched
#   --out DIR      where the report goes (default docs/bench/YYYY-MM-DD, or a temp dir with --quick)
#   --no-append    do not append the report to docs/bench/BENCHMARKS.md
#   --no-pin       do not pin servers and generator to CPUs
#   --port-base N  first loopback port used (default 27700); ports N..N+120 and N+10000.. must be free
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

QUICK=0 PIN=1 APPEND=1 OUT="" BASE=27700
ORIG_ARGS="$*"
while [ $# -gt 0 ]; do
	case "$1" in
	--quick) QUICK=1 ;;
	--out) OUT=$2; shift ;;
	--no-append) APPEND=0 ;;
	--no-pin) PIN=0 ;;
	--port-base) BASE=$2; shift ;;
	-h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) echo "bench.sh: unknown option $1 (try --help)" >&2; exit 2 ;;
	esac
	shift
done

log() { printf '== %s\n' "$*" >&2; }

# --- redis-server -----------------------------------------------------------
if ! command -v redis-server >/dev/null || ! command -v redis-cli >/dev/null; then
	log "installing redis-server (apt-get)"
	SUDO=""
	[ "$(id -u)" -ne 0 ] && SUDO=sudo
	$SUDO apt-get update -qq
	# Debian's package may try to start its own service; this script never
	# uses or stops it (it runs its own servers on private ports).
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq redis-server >/dev/null
fi

# --- build ------------------------------------------------------------------
WORK=$(mktemp -d /tmp/fcap-bench.XXXXXX)
PIDS=() SUITE=""
cleanup() {
	local pid
	if [ -n "$SUITE" ]; then
		kill -TERM "$SUITE" 2>/dev/null || true
		wait "$SUITE" 2>/dev/null || true
	fi
	for pid in "${PIDS[@]}"; do
		kill -TERM "$pid" 2>/dev/null || true
	done
	for pid in "${PIDS[@]}"; do
		for _ in $(seq 100); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
	rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

log "building fcapd and fcapbench"
go build -o "$WORK/fcapd" ./cmd/fcapd
go build -o "$WORK/fcapbench" ./cmd/fcapbench

SRV=() GEN=() PINNING="not pinned: servers and fcapbench share every CPU"
NCPU=$(nproc)
if [ "$PIN" = 1 ] && [ "$NCPU" -ge 2 ] && command -v taskset >/dev/null; then
	LAST=$((NCPU - 1))
	SRV=(taskset -c "$LAST")
	GEN=(taskset -c "0-$((LAST - 1))")
	PINNING="every server pinned to CPU $LAST (\`taskset -c $LAST\`: fcapd then runs with GOMAXPROCS=1, Redis is single-threaded anyway), fcapbench to CPU 0-$((LAST - 1)): each system under test gets one core and the load generator its own"
fi

# --- servers ----------------------------------------------------------------
port() { echo $((BASE + $1)); }
for off in $(seq 0 120); do
	if (exec 3<>"/dev/tcp/127.0.0.1/$((BASE + off))") 2>/dev/null; then
		echo "bench.sh: port $((BASE + off)) is in use; pick another --port-base" >&2
		exit 1
	fi
done

# start NAME CMD...: run a server in the background, remember its PID.
start() {
	local name=$1
	shift
	"${SRV[@]}" "$@" >"$WORK/$name.log" 2>&1 &
	PIDS+=($!)
}

# fcapd NAME OFFSET [JOIN_OFFSET]: data on BASE+OFFSET, gossip +40, HTTP +80.
fcapd() {
	local name=$1 off=$2 join=${3:-}
	local args=(--name "$name" --data "127.0.0.1:$(port "$off")" --gossip "127.0.0.1:$(port $((off + 40)))"
		--http "127.0.0.1:$(port $((off + 80)))" --gossip-profile local --log-level warn --pprof)
	[ -n "$join" ] && args+=(--join "127.0.0.1:$(port $((join + 40)))")
	start "fcapd-$name" "$WORK/fcapd" "${args[@]}"
}

ready() { # ready OFFSET: wait for fcapd's /readyz
	local url="http://127.0.0.1:$(port $(($1 + 80)))/readyz"
	for _ in $(seq 200); do
		curl -sf "$url" >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	echo "bench.sh: fcapd at offset $1 never became ready; logs in $WORK" >&2
	cat "$WORK"/fcapd-*.log >&2 || true
	exit 1
}

redis() { # redis NAME PORT [cluster]
	local name=$1 p=$2 dir="$WORK/$1"
	mkdir -p "$dir"
	local args=(--port "$p" --bind 127.0.0.1 --save "" --appendonly no --dir "$dir" --daemonize no --logfile "")
	[ "${3:-}" = cluster ] && args+=(--cluster-enabled yes --cluster-config-file "$dir/nodes.conf")
	start "redis-$name" redis-server "${args[@]}"
}

redis_ready() {
	for _ in $(seq 100); do
		redis-cli -p "$1" ping 2>/dev/null | grep -q PONG && return 0
		sleep 0.1
	done
	echo "bench.sh: redis-server on port $1 never answered" >&2
	exit 1
}

log "starting servers on 127.0.0.1:$BASE.. ($WORK)"
fcapd f1 0                                   # fcap, 1 node
fcapd f3a 10 && ready 10                     # fcap, 3 nodes
fcapd f3b 11 10 && fcapd f3c 12 10
fcapd memA 20 && fcapd memR 21               # empty nodes for the memory figures
R1=$(port 30) RC1=$(port 31) RC2=$(port 32) RC3=$(port 33) RMS=$(port 35) RMF=$(port 36)
redis standalone "$R1"
redis c1 "$RC1" cluster && redis c2 "$RC2" cluster && redis c3 "$RC3" cluster
redis memS "$RMS" && redis memF "$RMF"
for off in 0 10 11 12 20 21; do ready "$off"; done
for p in "$R1" "$RC1" "$RC2" "$RC3" "$RMS" "$RMF"; do redis_ready "$p"; done
redis-cli --cluster create "127.0.0.1:$RC1" "127.0.0.1:$RC2" "127.0.0.1:$RC3" --cluster-replicas 0 --cluster-yes >"$WORK/cluster-create.log" 2>&1
for _ in $(seq 100); do
	redis-cli -p "$RC1" cluster info | grep -q 'cluster_state:ok' && break
	sleep 0.1
done
redis-cli -p "$RC1" cluster info | grep -q 'cluster_state:ok' || { echo "bench.sh: Redis Cluster did not form" >&2; cat "$WORK/cluster-create.log" >&2; exit 1; }
sleep 2 # let the 3-node fcap ring settle: every node active in every view

# --- the suite --------------------------------------------------------------
if [ "$QUICK" = 1 ]; then
	TIMES=(--warmup 500ms --duration 1s --mem-viewers 20000)
	[ -z "$OUT" ] && OUT=$(mktemp -d /tmp/fcap-bench-quick.XXXXXX) && APPEND=0
else
	TIMES=(--warmup 2s --duration 8s)
fi
[ -z "$OUT" ] && OUT="docs/bench/$(date -u +%F)"
MD=()
[ "$APPEND" = 1 ] && MD=(--md docs/bench/BENCHMARKS.md)
F3="127.0.0.1:$(port 10),127.0.0.1:$(port 11),127.0.0.1:$(port 12)"
RC="127.0.0.1:$RC1,127.0.0.1:$RC2,127.0.0.1:$RC3"

# How busy the machine is with our servers idle: anything else running
# (tests, builds) lands in the figures.
busy() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8, $5 + $6 }' /proc/stat; }
read -r B0 I0 < <(busy)
sleep 2
read -r B1 I1 < <(busy)
IDLEBUSY=$(awk -v b=$((B1 - B0)) -v i=$((I1 - I0)) 'BEGIN { printf "%.0f", (b + i) ? 100 * b / (b + i) : 0 }')
if [ "$IDLEBUSY" -gt 10 ]; then
	echo "bench.sh: warning: the machine is ${IDLEBUSY}% busy before the run: something else is running and the figures will carry its noise" >&2
fi
COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD 2>/dev/null || COMMIT="$COMMIT plus uncommitted changes"
SETUP="Machine: $NCPU vCPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')), $(free -g | awk '/Mem:/ {print $2}') GiB; $(go version | cut -d' ' -f3); $(redis-server --version | cut -d' ' -f1-3); commit $COMMIT; the machine was ${IDLEBUSY}% busy with the servers up and idle, just before the run.
Pinning: $PINNING.
fcap: fcapd with its defaults (in memory only; R=2 owners per partition, so the 3-node cluster replicates every write to a backup); fcap-1 is one node, fcap-3 three nodes on loopback.
Redis: persistence off (\`--save '' --appendonly no\`), otherwise defaults; redis-cluster is 3 masters, no replicas, keys \`{viewer}:campaign\`.
Every target gets the same workload from the same generator: 64 callers (Redis: a pool of 64 connections, pipelines on their own 64), a 50 ms deadline per call, viewers Zipf-distributed over 1M (s=1.1, v=1000), 100 random campaigns out of 5,000 per ad request, a cap of 5 a day."

log "running the suite into $OUT"
# In the background, so a signal to this script stops it at once.
"${GEN[@]}" "$WORK/fcapbench" suite \
	--sut "fcap-1=fcap@127.0.0.1:$(port 0)" \
	--sut "fcap-3=fcap@$F3" \
	--sut "redis-sliding=redis-sliding@127.0.0.1:$R1" \
	--sut "redis-fixed=redis-fixed@127.0.0.1:$R1" \
	--sut "redis-cluster-sliding=redis-cluster-sliding@$RC" \
	--sut "redis-cluster-fixed=redis-cluster-fixed@$RC" \
	--mem "fcap=fcap/allow@127.0.0.1:$(port 20)#127.0.0.1:$(port 100)" \
	--mem "fcap=fcap/record@127.0.0.1:$(port 21)#127.0.0.1:$(port 101)" \
	--mem "redis-sliding=redis-sliding@127.0.0.1:$RMS" \
	--mem "redis-fixed=redis-fixed@127.0.0.1:$RMF" \
	--server-pids "$(IFS=,; echo "${PIDS[*]}")" \
	"${TIMES[@]}" --out "$OUT" "${MD[@]}" \
	--command "scripts/bench.sh${ORIG_ARGS:+ $ORIG_ARGS}" --setup "$SETUP" &
SUITE=$!
RC=0
wait "$SUITE" || RC=$?
SUITE=""
if [ "$RC" -ne 0 ]; then
	log "the suite reported failures (exit $RC); what it measured is in $OUT"
	exit "$RC"
fi
log "done: $OUT (servers stopped)"
