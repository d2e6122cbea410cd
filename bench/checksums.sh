#!/usr/bin/env bash
# bench/checksums.sh: what per-block checksums (raidd create --checksums)
# cost end to end. Each level is created twice on identical members, with
# and without --checksums, both served by raidd at once, and fio's nbd
# engine runs every job on both in interleaved rounds (off, on, off, on,
# ...). It prints, per level and job, the median of each, the on/off ratio
# and raidd's CPU time per MiB moved (user + system, from /proc/PID/stat).
# Not part of CI. See bench/README.md.
#
#   MEMBERS=tmpfs (default): members are files in $SHM, served without
#     --direct. Nothing waits for a disk, so the CPU the checksums add is
#     all there is to see: the worst case.
#   MEMBERS=disks: members are loop devices (losetup --direct-io=on) over
#     files in $SHM, throttled by a cgroup-v1 blkio group as in
#     bench/disks.sh, served with --direct inside that group. Needs root.
#
# Knobs (environment):
#   LEVELS     levels to compare                          (default "1 5")
#   DISKS      members per array                          (default 4; RAID1 uses 2)
#   DISK_SIZE  size of each member                        (default 256M)
#   CHUNK      chunk size                                 (default 64K)
#   BW, IOPS   per disk and direction, MEMBERS=disks only (default 100, 1000)
#   RUNTIME    seconds per fio job, after RAMP            (default 5)
#   RAMP       fio ramp_time in seconds                   (default 1)
#   ROUNDS     interleaved rounds; medians are printed    (default 3)
#   JOBS       fio jobs to run, from seq-read-1M seq-write-1M rand-read-4K
#              rand-write-4K                              (default all four)
#   SHM        directory for member files                 (default /dev/shm)
#   RAIDD_BIN  use this raidd binary instead of building one
set -euo pipefail

MEMBERS=${MEMBERS:-tmpfs}
LEVELS=${LEVELS:-"1 5"}
DISKS=${DISKS:-4}
DISK_SIZE=${DISK_SIZE:-256M}
CHUNK=${CHUNK:-64K}
BW=${BW:-100}
IOPS=${IOPS:-1000}
RUNTIME=${RUNTIME:-5}
RAMP=${RAMP:-1}
ROUNDS=${ROUNDS:-3}
SHM=${SHM:-/dev/shm}
BLKIO=${BLKIO:-/sys/fs/cgroup/blkio}

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)

die() { echo "checksums.sh: $*" >&2; exit 2; }

case $MEMBERS in
tmpfs) ;;
disks)
	[[ $(id -u) == 0 ]] || die "MEMBERS=disks needs root (loop devices and cgroups)"
	[[ -e $BLKIO/blkio.throttle.read_bps_device ]] || die "cgroup v1 blkio controller not found at $BLKIO: MEMBERS=disks throttles with cgroup v1 blkio only (MEMBERS=tmpfs needs neither)"
	command -v losetup >/dev/null || die "losetup not installed (apt-get install -y util-linux)"
	;;
*) die "MEMBERS must be tmpfs or disks, not $MEMBERS" ;;
esac
for tool in fio nbdinfo python3; do
	command -v "$tool" >/dev/null || die "$tool not installed (apt-get install -y fio libnbd-bin python3)"
done
fio --enghelp=nbd >/dev/null 2>&1 || die "fio has no nbd ioengine"

work=$(mktemp -d "$SHM/raidd-csum.XXXXXX")
sock=$(mktemp -d /tmp/rc.XXXXXX) # short paths for unix sockets
cg=$BLKIO/raidd-csum-$$
loops=()
pids=()

prog=checksums.sh
# shellcheck source=lib-disks.sh
source "$(dirname "$0")/lib-disks.sh"
trap bench_cleanup EXIT
trap 'exit 130' INT TERM

if [[ $MEMBERS == disks ]]; then
	mkdir "$cg" || die "cannot create the blkio cgroup $cg"
fi

if [[ -n "${RAIDD_BIN:-}" ]]; then
	bin=$RAIDD_BIN
else
	bin=$sock/raidd
	echo "building raidd ..." >&2
	(cd "$repo" && go build -o "$bin" ./cmd/raidd)
fi

bps=$((BW * 1024 * 1024))

# new_member NAME: a member over $work/NAME.img, in $member: the file itself
# (tmpfs), or a throttled loop device over it (disks).
new_member() {
	local img=$work/$1.img
	truncate -s "$DISK_SIZE" "$img"
	if [[ $MEMBERS == tmpfs ]]; then
		member=$img
		return
	fi
	throttled_loop "$img"
	member=$disk
}

# serve NAME MEMBERS...: raidd serve, inside the cgroup with --direct for
# disks; its pid is appended to pids.
serve() {
	local name=$1
	shift
	if [[ $MEMBERS == disks ]]; then
		(
			echo "$BASHPID" >"$cg/cgroup.procs"
			exec "$bin" serve --direct --listen "unix:$sock/$name.sock" --control "$sock/$name.ctl" --log-level warn "$@"
		) >"$work/$name.log" 2>&1 &
	else
		"$bin" serve --listen "unix:$sock/$name.sock" --control "$sock/$name.ctl" --log-level warn "$@" >"$work/$name.log" 2>&1 &
	fi
	pids+=($!)
	local i
	for ((i = 0; i < 100; i++)); do
		nbdinfo --size "nbd+unix:///$name?socket=$sock/$name.sock" >/dev/null 2>&1 && return 0
		kill -0 "${pids[-1]}" 2>/dev/null || die "raidd serve of $name exited: $(cat "$work/$name.log")"
		sleep 0.1
	done
	die "raidd serve of $name did not start"
}

# targets: "NAME:LEVEL:CSUM:PID:URI"
targets=()
for level in $LEVELS; do
	n=$DISKS
	[[ $level == 1 ]] && n=2
	for csum in off on; do
		name=r$level$csum
		members=()
		for ((i = 0; i < n; i++)); do
			new_member "$name-d$i"
			members+=("$member")
		done
		flags=()
		[[ $csum == on ]] && flags=(--checksums)
		"$bin" create --name "$name" --level "$level" --chunk "$CHUNK" "${flags[@]}" --log-level warn "${members[@]}" \
			>"$work/$name.create" 2>&1 || die "raidd create --level $level (checksums $csum) failed: $(cat "$work/$name.create")"
		serve "$name" "${members[@]}"
		targets+=("$name:$level:$csum:${pids[-1]}:nbd+unix:///$name?socket=$sock/$name.sock")
	done
done

# Precondition: write every target once, so that the jobs meet written
# data (a never-written block is a hole, which costs no checksum).
for target in "${targets[@]}"; do
	IFS=: read -r tname _ _ _ turi <<<"$target"
	size=$(nbdinfo --size "$turi")
	echo "preconditioning $tname ($size bytes) ..." >&2
	fio --name=pre --ioengine=nbd --uri="$turi" --rw=write --bs=1M --iodepth=8 --size="$size" \
		--output-format=json --output="$work/pre.$tname.json" >/dev/null
	# fio writes whole blocks only: the rest of a size that is not a whole
	# number of MiB in 4 KiB blocks. Left unwritten, the members' last
	# pages stay holes, and a file member whose last page holds no data
	# checks its size with an fstat after every write (member.File's tail
	# probe), which the array without checksums, whose size here is a whole
	# number of MiB, did not pay.
	rem=$((size % (1 << 20)))
	if ((rem > 0)); then
		fio --name=pre-tail --ioengine=nbd --uri="$turi" --rw=write --bs=4k --iodepth=8 --offset=$((size - rem)) --size="$rem" \
			--output-format=json --output="$work/pre-tail.$tname.json" >/dev/null
	fi
done

alljobs=(
	"seq-read-1M:--rw=read --bs=1M --iodepth=8"
	"seq-write-1M:--rw=write --bs=1M --iodepth=8"
	"rand-read-4K:--rw=randread --bs=4k --iodepth=32"
	"rand-write-4K:--rw=randwrite --bs=4k --iodepth=32"
)
JOBS=${JOBS:-"seq-read-1M seq-write-1M rand-read-4K rand-write-4K"}
jobs=()
for want in $JOBS; do
	found=
	for job in "${alljobs[@]}"; do
		[[ ${job%%:*} == "$want" ]] && jobs+=("$job") && found=1
	done
	[[ -n $found ]] || die "unknown job $want in JOBS (known: seq-read-1M seq-write-1M rand-read-4K rand-write-4K)"
done

# cpu_ticks PID: user + system clock ticks of the process.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

echo "members: $MEMBERS, $DISKS per array (RAID1: 2) of $DISK_SIZE, chunk $CHUNK$([[ $MEMBERS == disks ]] && echo ", $BW MiB/s and $IOPS IOPS per disk and direction"); $ROUNDS round(s) of $RUNTIME s (+$RAMP s ramp) per job; load: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for ((round = 1; round <= ROUNDS; round++)); do
	for job in "${jobs[@]}"; do
		jname=${job%%:*}
		jargs=${job#*:}
		for target in "${targets[@]}"; do
			IFS=: read -r tname _ _ tpid turi <<<"$target"
			echo "round $round: fio $jname on $tname ..." >&2
			t0=$(cpu_ticks "$tpid")
			# shellcheck disable=SC2086
			fio --name="$jname" --ioengine=nbd --uri="$turi" $jargs --numjobs=1 \
				--time_based --runtime="$RUNTIME" --ramp_time="$RAMP" \
				--output-format=json --output="$work/$jname.$tname.$round.json" >/dev/null
			echo "$(($(cpu_ticks "$tpid") - t0))" >"$work/$jname.$tname.$round.cpu"
		done
	done
done

python3 - "$work" "$ROUNDS" "$(getconf CLK_TCK)" "$RAMP" "$RUNTIME" "${#jobs[@]}" "${jobs[@]}" "${targets[@]}" <<'EOF'
import json, statistics, sys
work, rounds, hz, ramp, runtime, njobs = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5]), int(sys.argv[6])
jobs = [j.split(":", 1)[0] for j in sys.argv[7:7 + njobs]]
targets = [t.split(":")[:3] for t in sys.argv[7 + njobs:]]

def run(job, target, r):
    with open(f"{work}/{job}.{target}.{r}.json") as f:
        text = f.read()
    j = json.loads(text[text.index("{"):])["jobs"][0]  # skip any notes fio prints first
    if j.get("error", 0):
        sys.exit(f"fio {job} on {target}: error {j['error']}")
    side = j["write"] if "write" in job else j["read"]
    rate = side["bw_bytes"] / 2**20 if job.startswith("seq") else side["iops"]
    with open(f"{work}/{job}.{target}.{r}.cpu") as f:
        cpu = int(f.read()) / hz
    # The CPU time covers the ramp too, at the same rate: per MiB moved.
    mib = side["bw_bytes"] * (ramp + runtime) / 2**20
    return rate, cpu / mib * 1e6 if mib else float("nan")

def med(job, target):
    rs = [run(job, target, r) for r in range(1, rounds + 1)]
    return statistics.median(x[0] for x in rs), statistics.median(x[1] for x in rs)

def spread(job, level):
    # on/off of each round (the two ran one after the other): its range
    # says how far a single pair can be trusted on this machine.
    rs = [run(job, f"r{level}on", r)[0] / run(job, f"r{level}off", r)[0] for r in range(1, rounds + 1)]
    return min(rs), max(rs)

levels = []
for name, level, csum in targets:
    if level not in levels:
        levels.append(level)
print(f"{'level':<7}{'job':<15}{'off':>10}{'on':>10}{'on/off':>8}{'cost':>7}{'rounds':>12}{'cpu us/MiB off':>16}{'on':>8}{'target':>8}")
print("-" * 101)
for level in levels:
    for job in jobs:
        off, coff = med(job, f"r{level}off")
        on, con = med(job, f"r{level}on")
        target = "15%" if job == "rand-write-4K" else ("10%" if job.startswith("seq") else "-")
        lo, hi = spread(job, level)
        print(f"raid{level:<3}{job:<15}{off:>10.0f}{on:>10.0f}{on / off:>8.2f}{(1 - on / off) * 100:>6.0f}%{f'{lo:.2f}-{hi:.2f}':>12}{coff:>16.0f}{con:>8.0f}{target:>8}")
print()
print("off/on: sequential jobs in MiB/s, random jobs in IOPS; median of", rounds, "interleaved round(s)")
print("cost: 1 - on/off (the issue's targets: at most 10% on sequential read and write, 15% on random 4K write)")
print("rounds: the lowest and highest on/off of a single round (off and on ran one after the other)")
print("cpu us/MiB: raidd's user + system CPU time per MiB the job moved")
EOF
