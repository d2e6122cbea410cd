#!/usr/bin/env bash
# bench/conn-memory.sh: the connection-memory soak of issue 7. Starts the
# real raidd on a RAID0 of two sparse files, attacks it over loopback TCP
# with bench/connmem (50 connections trickling 32 MiB WRITE payloads, then
# 50 connections whose READ replies are never read, then more idle
# connections than the connection limit), samples raidd's VmRSS/VmHWM from
# /proc and exits 1 if the peak exceeds LIMIT. See bench/README.md.
#
# Knobs (environment):
#   RAIDD_BIN    use this raidd binary instead of building ./cmd/raidd
#   PHASE        duration of each attack phase              (default 40s)
#   LIMIT        maximum allowed raidd VmHWM                 (default 256MiB)
#   WORK         directory for the member files              (default $TMPDIR or /tmp)
#   RAIDD_NBD_*  passed to raidd serve as usual (e.g. RAIDD_NBD_IO_TIMEOUT=10s)
# Any arguments are passed to connmem (e.g. -writers 10 -rate 1MiB).
set -euo pipefail

PHASE=${PHASE:-40s}
LIMIT=${LIMIT:-256MiB}
WORK=${WORK:-${TMPDIR:-/tmp}}

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
export PATH="$PATH:/usr/local/go/bin"

for tool in go python3; do
	command -v "$tool" >/dev/null || { echo "conn-memory.sh: $tool not installed" >&2; exit 2; }
done

work=$(mktemp -d "$WORK/raidd-connmem.XXXXXX")
pid=
cleanup() {
	if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then
		kill -TERM "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [[ -n "${RAIDD_BIN:-}" ]]; then
	bin=$RAIDD_BIN
else
	bin=$work/raidd
	echo "building raidd ..." >&2
	(cd "$repo" && go build -o "$bin" ./cmd/raidd)
fi
(cd "$repo" && go build -o "$work/connmem" ./bench/connmem)

members=("$work/m0.img" "$work/m1.img")
"$bin" create --name soak --level 0 --size 512M "${members[@]}" >/dev/null
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$bin" serve --listen "127.0.0.1:$port" --control "$work/ctl.sock" --log-level warn "${members[@]}" \
	>"$work/raidd.log" 2>&1 &
pid=$!
for ((i = 0; i < 100; i++)); do
	[[ -S "$work/ctl.sock" ]] && break
	kill -0 "$pid" 2>/dev/null || { cat "$work/raidd.log" >&2; echo "conn-memory.sh: raidd exited" >&2; exit 2; }
	sleep 0.1
done
sleep 0.5

echo "raidd $("$bin" --version 2>/dev/null || echo "(version unknown)"), pid $pid, 127.0.0.1:$port" >&2
env | grep '^RAIDD_NBD_' >&2 || true
rc=0
"$work/connmem" -addr "127.0.0.1:$port" -export soak -pid "$pid" -phase "$PHASE" -limit "$LIMIT" "$@" || rc=$?

if command -v curl >/dev/null; then
	echo
	echo "raidd NBD metrics after the attack:"
	curl -s --max-time 5 --unix-socket "$work/ctl.sock" http://raidd/metrics | grep -E '^raidd_nbd_(active_connections|connections_total|refused|in_flight|timeouts)' || true
fi
if ! kill -0 "$pid" 2>/dev/null; then
	echo "conn-memory.sh: raidd died during the attack; its log:" >&2
	cat "$work/raidd.log" >&2
	exit 1
fi
exit "$rc"
