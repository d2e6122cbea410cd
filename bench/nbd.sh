#!/usr/bin/env bash
# bench/nbd.sh: raidd RAID0 and RAID5 against nbdkit's file plugin, same run,
# same fio jobs, over unix sockets. See bench/README.md.
#
# Knobs (environment):
#   MEMBER_SIZE  size of each of the 4 sparse member files   (default 1G)
#   CHUNK        chunk size of both arrays                   (default 64K)
#   RUNTIME      seconds per fio job, after RAMP             (default 10)
#   RAMP         fio ramp_time in seconds                    (default 2)
#   SHM          directory for members and the peer image    (default /dev/shm)
#   RAIDD_BIN    use this raidd binary instead of building one
#   STRICT=1     exit 1 when a target is missed
set -euo pipefail

MEMBER_SIZE=${MEMBER_SIZE:-1G}
CHUNK=${CHUNK:-64K}
RUNTIME=${RUNTIME:-10}
RAMP=${RAMP:-2}
SHM=${SHM:-/dev/shm}
STRICT=${STRICT:-0}

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)

for tool in fio nbdkit nbdinfo python3; do
	command -v "$tool" >/dev/null || { echo "nbd.sh: $tool not installed (apt-get install -y fio nbdkit libnbd-bin python3)" >&2; exit 2; }
done
fio --enghelp=nbd >/dev/null 2>&1 || { echo "nbd.sh: fio has no nbd ioengine" >&2; exit 2; }

work=$(mktemp -d "$SHM/raidd-bench.XXXXXX")
sock=$(mktemp -d /tmp/rb.XXXXXX) # short paths for unix sockets
pids=()

cleanup() {
	local pid
	for pid in "${pids[@]}"; do
		if kill -0 "$pid" 2>/dev/null; then
			kill -TERM "$pid" 2>/dev/null || true
			wait "$pid" 2>/dev/null || true
		fi
	done
	rm -rf "$work" "$sock"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [[ -n "${RAIDD_BIN:-}" ]]; then
	bin=$RAIDD_BIN
else
	bin=$sock/raidd
	echo "building raidd ..." >&2
	(cd "$repo" && go build -o "$bin" ./cmd/raidd)
fi

# wait_sock PATH PID: wait up to 10 s for a server to listen on PATH.
wait_sock() {
	local i
	for ((i = 0; i < 100; i++)); do
		if nbdinfo --size "nbd+unix:///${3:-}?socket=$1" >/dev/null 2>&1; then
			return 0
		fi
		kill -0 "$2" 2>/dev/null || { echo "nbd.sh: server on $1 exited" >&2; return 1; }
		sleep 0.1
	done
	echo "nbd.sh: server on $1 did not start" >&2
	return 1
}

# start_raidd NAME LEVEL: create a 4-member array NAME and serve it.
start_raidd() {
	local name=$1 level=$2 i members=()
	for i in 0 1 2 3; do members+=("$work/$name-m$i.img"); done
	"$bin" create --name "$name" --level "$level" --chunk "$CHUNK" --size "$MEMBER_SIZE" "${members[@]}" >&2
	"$bin" serve --listen "unix:$sock/$name.sock" --control "$sock/$name.ctl" --log-level warn "${members[@]}" \
		>"$work/$name.log" 2>&1 &
	pids+=($!)
	eval "pid_$name=$!"
	wait_sock "$sock/$name.sock" $! "$name"
}

start_raidd r0 0
start_raidd r5 5
r0_size=$(nbdinfo --size "nbd+unix:///r0?socket=$sock/r0.sock")

# The peer: nbdkit's file plugin on one tmpfs image as large as the RAID0.
truncate -s "$r0_size" "$work/peer.img"
nbdkit --foreground --exit-with-parent --threads 2 -U "$sock/peer.sock" file "$work/peer.img" \
	>"$work/peer.log" 2>&1 &
pids+=($!)
wait_sock "$sock/peer.sock" $! ""

# Writes run before reads, so reads hit written data.
jobs=(
	"seq-write-1M:--rw=write --bs=1M --iodepth=8"
	"seq-read-1M:--rw=read --bs=1M --iodepth=8"
	"rand-write-4K:--rw=randwrite --bs=4k --iodepth=32"
	"rand-read-4K:--rw=randread --bs=4k --iodepth=32"
)
targets=(
	"raid0:nbd+unix:///r0?socket=$sock/r0.sock"
	"raid5:nbd+unix:///r5?socket=$sock/r5.sock"
	"nbdkit:nbd+unix:///?socket=$sock/peer.sock"
)

echo "members: 4 x $MEMBER_SIZE sparse files in $SHM, chunk $CHUNK; nbdkit file, --threads 2, $r0_size bytes" >&2
for job in "${jobs[@]}"; do
	jname=${job%%:*}
	jargs=${job#*:}
	for target in "${targets[@]}"; do
		tname=${target%%:*}
		turi=${target#*:}
		echo "fio $jname on $tname ..." >&2
		# shellcheck disable=SC2086
		fio --name="$jname" --ioengine=nbd --uri="$turi" $jargs --numjobs=1 \
			--time_based --runtime="$RUNTIME" --ramp_time="$RAMP" \
			--output-format=json --output="$work/$jname.$tname.json" >/dev/null
	done
done

hwm() { awk '/^VmHWM:/ {print $2}' "/proc/$1/status"; } # KiB
r0_hwm=$(hwm "$pid_r0")
r5_hwm=$(hwm "$pid_r5")

python3 - "$work" "$r0_hwm" "$r5_hwm" "$STRICT" "${jobs[@]}" <<'EOF'
import json, sys
work, r0_hwm, r5_hwm, strict = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
jobs = [j.split(":", 1)[0] for j in sys.argv[5:]]

def result(job, target):
    with open(f"{work}/{job}.{target}.json") as f:
        text = f.read()
    d = json.loads(text[text.index("{"):])  # skip any notes fio prints first
    j = d["jobs"][0]
    side = j["write"] if "write" in job else j["read"]
    if j.get("error", 0):
        sys.exit(f"fio {job} on {target}: error {j['error']}")
    return side["bw_bytes"] / 1e6, side["iops"]

missed = []
hdr = f"{'job':<14} {'raid0 MB/s':>10} {'IOPS':>8} {'raid5 MB/s':>10} {'IOPS':>8} {'nbdkit MB/s':>11} {'IOPS':>8} {'r0/kit':>7} {'r5/kit':>7}"
print(hdr)
print("-" * len(hdr))
for job in jobs:
    r0, r5, kit = (result(job, t) for t in ("raid0", "raid5", "nbdkit"))
    q0 = r0[0] / kit[0] if kit[0] else 0
    q5 = r5[0] / kit[0] if kit[0] else 0
    flag = ""
    if q0 < 0.8:
        missed.append(f"RAID0 {job}: {q0:.2f}x nbdkit < 0.8x")
        flag += " r0<0.8!"
    if job == "seq-write-1M" and q5 < 0.6:
        missed.append(f"RAID5 {job}: {q5:.2f}x nbdkit < 0.6x")
        flag += " r5<0.6!"
    print(f"{job:<14} {r0[0]:>10.1f} {r0[1]:>8.0f} {r5[0]:>10.1f} {r5[1]:>8.0f} {kit[0]:>11.1f} {kit[1]:>8.0f} {q0:>6.2f}x {q5:>6.2f}x{flag}")
print()
for name, kib in (("raid0", r0_hwm), ("raid5", r5_hwm)):
    mib = kib / 1024
    ok = mib < 256
    if not ok:
        missed.append(f"raidd {name} peak RSS {mib:.0f} MiB >= 256 MiB")
    print(f"raidd {name} peak RSS (VmHWM): {mib:.1f} MiB {'ok' if ok else 'OVER 256 MiB'}")
print()
print("targets: RAID0 >= 0.8x nbdkit in every job; RAID5 seq write >= 0.6x nbdkit; raidd RSS < 256 MiB")
if missed:
    print("MISSED: " + "; ".join(missed))
    sys.exit(1 if strict else 0)
print("all targets met")
EOF
