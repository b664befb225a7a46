#!/usr/bin/env bash
# scripts/statuspage-screenshot.sh: renders a node's status page in
# headless Chromium and checks the picture.
#
#   scripts/statuspage-screenshot.sh [OUT.png]   (default docs/statuspage.png)
#
# It installs Debian's chromium with apt-get when missing, starts a 3-node
# cluster on private loopback ports, loads some traffic, screenshots
# http://NODE/ and fails unless the image is a real page: a PNG of the
# window's size with the ring drawn (many distinct colors, not blank). It
# stops only what it started.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-docs/statuspage.png}
BASE=29900

if ! command -v chromium >/dev/null; then
	SUDO=""
	[ "$(id -u)" -ne 0 ] && SUDO=sudo
	$SUDO apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
fi

WORK=$(mktemp -d /tmp/fcap-page.XXXXXX)
PIDS=()
cleanup() {
	for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
	for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
	rm -rf "$WORK"
}
trap cleanup EXIT

go build -o "$WORK/fcapd" ./cmd/fcapd
go build -o "$WORK/fcapbench" ./cmd/fcapbench
for i in 0 1 2; do
	args=(--name "node-$i" --data "127.0.0.1:$((BASE + i))" --gossip "127.0.0.1:$((BASE + 40 + i))"
		--http "127.0.0.1:$((BASE + 80 + i))" --gossip-profile local --log-level warn --memory-limit 64MiB)
	[ "$i" -gt 0 ] && args+=(--join "127.0.0.1:$((BASE + 40))")
	"$WORK/fcapd" "${args[@]}" >"$WORK/n$i.log" 2>&1 &
	PIDS+=($!)
done
URL="http://127.0.0.1:$((BASE + 80))/"
for _ in $(seq 100); do
	[ "$(curl -sf "$URL" | grep -o '>active<' | wc -l)" = 3 ] && break
	sleep 0.2
done
"$WORK/fcapbench" --addr "127.0.0.1:$BASE" --workload mix --duration 3s --warmup 0s --quiet >/dev/null
curl -sf "$URL" >/dev/null # a first load, so the next shows request rates
"$WORK/fcapbench" --addr "127.0.0.1:$BASE" --workload check --duration 2s --warmup 0s --quiet >/dev/null

mkdir -p "$(dirname "$OUT")"
chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1700,1000 \
	--screenshot="$OUT" "$URL" >/dev/null 2>&1
go run ./scripts/pngcheck "$OUT" 1700 1000
echo "status page screenshot: $OUT"
