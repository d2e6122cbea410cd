#!/usr/bin/env bash
# bench/nbd-ab.sh: two raidd binaries (A and B, e.g. before and after a
# change) on the same fio jobs, interleaved: per run the server's CPU time
# per request and per GiB and its context switches per request (all its
# threads, voluntary and not), which show per-request overhead (hand-offs,
# system calls, poller waits) more steadily than throughput on a shared
# machine. Each run serves a fresh 4-member array on tmpfs over a unix
# socket, writes it end to end first (steady state), then runs one fio job.
#
#   bench/nbd-ab.sh OLD_RAIDD NEW_RAIDD
#   LEVELS="0 5" JOBS="sr sw rw rr" ROUNDS=2 RUNTIME=5 bench/nbd-ab.sh A B
#   bench/nbd-ab.sh nbdkit NEW_RAIDD
#
# A side named nbdkit is nbd.sh's peer instead of a raidd binary:
# `nbdkit --threads 2 file` on one tmpfs image as large as the RAID0 of
# the same members (the same for every level).
#
# Jobs: sr/sw sequential read/write bs=1M iodepth 8; rr/rw random 4 KiB
# read/write iodepth 32. Needs fio (nbd engine), nbdinfo and python3.
set -euo pipefail
[[ $# -eq 2 ]] || { echo "usage: $0 RAIDD_A RAIDD_B" >&2; exit 2; }
A=$1 B=$2
LEVELS=${LEVELS:-0}
JOBS=${JOBS:-sr sw rw rr}
ROUNDS=${ROUNDS:-2}
RUNTIME=${RUNTIME:-5}
MEMBER_SIZE=${MEMBER_SIZE:-256M}
CHUNK=${CHUNK:-64K}
SHM=${SHM:-/dev/shm}

pid=
w=
s=
cleanup() {
	if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then
		kill -TERM "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	[[ -n "$w" ]] && rm -rf "$w"
	[[ -n "$s" ]] && rm -rf "$s"
	pid= w= s=
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# one NAME BIN LEVEL JOB: one run, one line of results.
one() {
	local name=$1 bin=$2 level=$3 job=$4 i m=() uri args
	w=$(mktemp -d "$SHM/raidd-ab.XXXXXX")
	s=$(mktemp -d /tmp/rab.XXXXXX)
	for i in 0 1 2 3; do m+=("$w/m$i"); done
	if [[ $bin == nbdkit ]]; then
		truncate -s "$(($(numfmt --from=iec "$MEMBER_SIZE") * 4))" "$w/peer.img"
		nbdkit --foreground --exit-with-parent --threads 2 -U "$s/a.sock" file "$w/peer.img" >"$w/log" 2>&1 &
		pid=$!
		uri="nbd+unix:///?socket=$s/a.sock"
	else
		"$bin" create --name a --level "$level" --chunk "$CHUNK" --size "$MEMBER_SIZE" "${m[@]}" >/dev/null 2>&1
		"$bin" serve --listen "unix:$s/a.sock" --control "$s/a.ctl" --log-level warn "${m[@]}" >"$w/log" 2>&1 &
		pid=$!
		uri="nbd+unix:///a?socket=$s/a.sock"
	fi
	for ((i = 0; i < 100; i++)); do
		nbdinfo --size "$uri" >/dev/null 2>&1 && break
		sleep 0.1
	done
	fio --name=pre --ioengine=nbd --uri="$uri" --rw=write --bs=1M --iodepth=8 --output-format=terse >/dev/null
	case $job in
	sw) args="--rw=write --bs=1M --iodepth=8" ;;
	sr) args="--rw=read --bs=1M --iodepth=8" ;;
	rw) args="--rw=randwrite --bs=4k --iodepth=32" ;;
	rr) args="--rw=randread --bs=4k --iodepth=32" ;;
	*) echo "unknown job $job" >&2; exit 2 ;;
	esac
	local c0 x0 c1 x1
	c0=$(awk '{print $14 + $15}' "/proc/$pid/stat")
	x0=$(cat /proc/"$pid"/task/*/status | awk '/ctxt_switches/ {n += $2} END {print n}')
	# shellcheck disable=SC2086
	fio --name=j --ioengine=nbd --uri="$uri" $args --time_based --runtime="$RUNTIME" --output-format=json >"$w/out.json"
	c1=$(awk '{print $14 + $15}' "/proc/$pid/stat")
	x1=$(cat /proc/"$pid"/task/*/status | awk '/ctxt_switches/ {n += $2} END {print n}')
	python3 - "$w/out.json" $((c1 - c0)) $((x1 - x0)) "$(getconf CLK_TCK)" "$name raid$level $job" <<'PY'
import json, sys
t = open(sys.argv[1]).read()
j = json.loads(t[t.index("{"):])["jobs"][0]
side = j["write"] if j["write"]["io_bytes"] else j["read"]
cpu, n = int(sys.argv[2]) / int(sys.argv[4]), side["total_ios"]
print(f"{sys.argv[5]:<16} {side['bw_bytes'] / 1e6:8.1f} MB/s {side['iops']:8.0f} IOPS  "
      f"CPU {cpu / (side['io_bytes'] / 2**30):6.3f} s/GiB {cpu / n * 1e6:7.1f} us/req  ctxsw/req {int(sys.argv[3]) / n:6.2f}")
PY
	cleanup
}

echo "A = $A, B = $B; load: $(cut -d' ' -f1-3 /proc/loadavg)"
for level in $LEVELS; do
	for job in $JOBS; do
		for ((r = 1; r <= ROUNDS; r++)); do
			one A "$A" "$level" "$job"
			one B "$B" "$level" "$job"
		done
	done
done
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
