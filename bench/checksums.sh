#!/usr/bin/env bash
# bench/checksums.sh: what an integrity feature costs end to end, as a
# client sees it. FEATURE=checksums (the default): per-block checksums
# (raidd create --checksums). FEATURE=ppl: the write-hole log (consistency
# policy ppl, the RAID5/RAID6 default) against policy bitmap, usually with
# DEGRADED=1, the case the log exists for. Each level is created twice on
# identical members, without the feature ("off") and with it ("on"), both
# served by raidd at once, and fio's nbd engine runs every job on both in
# interleaved rounds (off, on, then on, off, ...: even rounds take the
# arrays in reverse). It prints, per level and job, the median of each,
# the on/off ratio and raidd's CPU time per MiB moved (user + system, from
# /proc/PID/stat). Not part of CI. See bench/README.md.
#
#   MEMBERS=tmpfs (default): members are files in $SHM, served without
#     --direct. Nothing waits for a disk, so the CPU the feature adds is
#     all there is to see: the worst case.
#   MEMBERS=disks: members are loop devices (losetup --direct-io=on) over
#     files in $SHM, throttled by a cgroup-v1 blkio group as in
#     bench/disks.sh, served with --direct inside that group. Needs root.
#
# Knobs (environment):
#   FEATURE    checksums or ppl                           (default checksums)
#   DEGRADED   members to fail after preconditioning      (default 0; RAID6
#              and DEGRADED=1 fail two, RAID1 and RAID10 one)
#   LEVELS     levels to compare                          (default "1 5"; ppl: "5 6")
#   DISKS      members per array                          (default 4; RAID1 uses 2)
#   DISK_SIZE  size of each member                        (default 256M)
#   CHUNK      chunk size                                 (default 64K)
#   BW, IOPS   per disk and direction, MEMBERS=disks only (default 100, 1000)
#   RUNTIME    seconds per fio job, after RAMP            (default 5)
#   RAMP       fio ramp_time in seconds                   (default 1)
#   ROUNDS     interleaved rounds; medians are printed    (default 3)
#   JOBS       fio jobs to run, from seq-read-1M seq-write-1M seq-write-64K
#              rand-read-4K rand-write-4K                 (default: the four
#              but seq-write-64K; ppl: seq-write-1M seq-write-64K rand-write-4K)
#   SHM        directory for member files                 (default /dev/shm)
#   RAIDD_BIN  use this raidd binary instead of building one
#   OLD_RAIDD_BIN  also create each level with the feature by this (older)
#              raidd binary, served by it beside the other two, in the
#              same interleaved rounds: a before/after of a change to the
#              feature's cost in one run (printed as "old" columns; the
#              members then take half as much $SHM again)
set -euo pipefail

MEMBERS=${MEMBERS:-tmpfs}
FEATURE=${FEATURE:-checksums}
DEGRADED=${DEGRADED:-0}
case $FEATURE in
checksums) LEVELS=${LEVELS:-"1 5"} ;;
ppl) LEVELS=${LEVELS:-"5 6"} ;;
*) echo "checksums.sh: FEATURE must be checksums or ppl, not $FEATURE" >&2; exit 2 ;;
esac
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

# serve NAME MEMBERS...: raidd serve ($sbin), inside the cgroup with
# --direct for disks; its pid is appended to pids.
serve() {
	local name=$1
	shift
	if [[ $MEMBERS == disks ]]; then
		(
			echo "$BASHPID" >"$cg/cgroup.procs"
			exec "$sbin" serve --direct --listen "unix:$sock/$name.sock" --control "$sock/$name.ctl" --log-level warn "$@"
		) >"$work/$name.log" 2>&1 &
	else
		"$sbin" serve --listen "unix:$sock/$name.sock" --control "$sock/$name.ctl" --log-level warn "$@" >"$work/$name.log" 2>&1 &
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

# targets: "NAME:LEVEL:CSUM:PID:URI" (CSUM: off or on, the feature's side);
# tmembers[NAME]: the array's members, in order.
targets=()
declare -A tmembers
for level in $LEVELS; do
	n=$DISKS
	[[ $level == 1 ]] && n=2
	kinds="off on"
	[[ -n ${OLD_RAIDD_BIN:-} ]] && kinds="off on old"
	for csum in $kinds; do
		name=r$level$csum
		members=()
		for ((i = 0; i < n; i++)); do
			new_member "$name-d$i"
			members+=("$member")
		done
		flags=()
		case $FEATURE:$csum in
		checksums:on | checksums:old) flags=(--checksums) ;;
		ppl:off) flags=(--consistency-policy bitmap) ;;
		ppl:on | ppl:old) flags=(--consistency-policy ppl) ;;
		esac
		sbin=$bin
		[[ $csum == old ]] && sbin=$OLD_RAIDD_BIN
		"$sbin" create --name "$name" --level "$level" --chunk "$CHUNK" "${flags[@]}" --log-level warn "${members[@]}" \
			>"$work/$name.create" 2>&1 || die "raidd create --level $level ($FEATURE $csum) failed: $(cat "$work/$name.create")"
		serve "$name" "${members[@]}"
		targets+=("$name:$level:$csum:${pids[-1]}:nbd+unix:///$name?socket=$sock/$name.sock")
		tmembers[$name]="${members[*]}"
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

# DEGRADED: fail the first members of every array (the same on both sides),
# after preconditioning, so that the jobs meet data the missing members held.
if ((DEGRADED > 0)); then
	for target in "${targets[@]}"; do
		IFS=: read -r tname tlevel tcsum _ <<<"$target"
		read -r -a tm <<<"${tmembers[$tname]}"
		sbin=$bin
		[[ $tcsum == old ]] && sbin=$OLD_RAIDD_BIN
		k=$DEGRADED
		case $tlevel in
		6) ((k < 2)) && k=2 ;;
		1 | 10 | 5) k=1 ;;
		0) die "DEGRADED: RAID0 cannot run degraded" ;;
		esac
		for ((i = 0; i < k; i++)); do
			"$sbin" fail --control "$sock/$tname.ctl" "$tname" "${tm[$i]}" >/dev/null || die "raidd fail $tname ${tm[$i]} failed"
		done
		echo "$tname: failed $k member(s)" >&2
	done
fi

alljobs=(
	"seq-read-1M:--rw=read --bs=1M --iodepth=8"
	"seq-write-1M:--rw=write --bs=1M --iodepth=8"
	"seq-write-64K:--rw=write --bs=64k --iodepth=16"
	"rand-read-4K:--rw=randread --bs=4k --iodepth=32"
	"rand-write-4K:--rw=randwrite --bs=4k --iodepth=32"
)
if [[ $FEATURE == ppl ]]; then
	JOBS=${JOBS:-"seq-write-1M seq-write-64K rand-write-4K"}
else
	JOBS=${JOBS:-"seq-read-1M seq-write-1M rand-read-4K rand-write-4K"}
fi
jobs=()
for want in $JOBS; do
	found=
	for job in "${alljobs[@]}"; do
		[[ ${job%%:*} == "$want" ]] && jobs+=("$job") && found=1
	done
	[[ -n $found ]] || die "unknown job $want in JOBS (known: seq-read-1M seq-write-1M seq-write-64K rand-read-4K rand-write-4K)"
done

# cpu_ticks PID: user + system clock ticks of the process.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# log_counts NAME: the write-hole log's records and log writes so far
# ("0 0" without a log), from raidd status --json.
log_counts() {
	{ "$bin" status --json --control "$sock/$1.ctl" "$1" || true; } 2>/dev/null | python3 -c '
import json, sys
def find(x):
    if isinstance(x, dict):
        if isinstance(x.get("journal"), dict):
            return x["journal"]
        x = list(x.values())
    if isinstance(x, list):
        for v in x:
            j = find(v)
            if j:
                return j
try:
    j = find(json.load(sys.stdin)) or {}
except ValueError:
    j = {}
print(j.get("records", 0), j.get("log_writes", 0))'
}

echo "feature: $FEATURE$( ((DEGRADED > 0)) && echo ", degraded"); members: $MEMBERS, $DISKS per array (RAID1: 2) of $DISK_SIZE, chunk $CHUNK$([[ $MEMBERS == disks ]] && echo ", $BW MiB/s and $IOPS IOPS per disk and direction"); $ROUNDS round(s) of $RUNTIME s (+$RAMP s ramp) per job; load: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for ((round = 1; round <= ROUNDS; round++)); do
	# Even rounds take the arrays in the reverse order, so that no array
	# always runs right after the same other one (what one leaves behind in
	# the caches, or a neighbour's job starting, favours no side).
	order=("${targets[@]}")
	if ((round % 2 == 0)); then
		order=()
		for ((i = ${#targets[@]} - 1; i >= 0; i--)); do order+=("${targets[i]}"); done
	fi
	for job in "${jobs[@]}"; do
		jname=${job%%:*}
		jargs=${job#*:}
		for target in "${order[@]}"; do
			IFS=: read -r tname _ _ tpid turi <<<"$target"
			echo "round $round: fio $jname on $tname ..." >&2
			read -r r0 w0 < <(log_counts "$tname")
			t0=$(cpu_ticks "$tpid")
			# shellcheck disable=SC2086
			fio --name="$jname" --ioengine=nbd --uri="$turi" $jargs --numjobs=1 \
				--time_based --runtime="$RUNTIME" --ramp_time="$RAMP" \
				--output-format=json --output="$work/$jname.$tname.$round.json" >/dev/null
			echo "$(($(cpu_ticks "$tpid") - t0))" >"$work/$jname.$tname.$round.cpu"
			read -r r1 w1 < <(log_counts "$tname")
			echo "$((r1 - r0)) $((w1 - w0))" >"$work/$jname.$tname.$round.log"
		done
	done
done

python3 - "$work" "$ROUNDS" "$(getconf CLK_TCK)" "$RAMP" "$RUNTIME" "$FEATURE" "$DEGRADED" "${#jobs[@]}" "${jobs[@]}" "${targets[@]}" <<'EOF'
import json, statistics, sys
work, rounds, hz, ramp, runtime = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
feature, degraded, njobs = sys.argv[6], int(sys.argv[7]), int(sys.argv[8])
jobs = [j.split(":", 1)[0] for j in sys.argv[9:9 + njobs]]
targets = [t.split(":")[:3] for t in sys.argv[9 + njobs:]]

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
def log_ratios(job, target):
    # The write-hole log's records per client write and per log write
    # (group commit), over the rounds (ramps included, as the counters
    # are); "-" when the target wrote no log.
    recs = writes = ops = 0
    for r in range(1, rounds + 1):
        with open(f"{work}/{job}.{target}.{r}.log") as f:
            a, b = map(int, f.read().split())
        recs, writes = recs + a, writes + b
        with open(f"{work}/{job}.{target}.{r}.json") as f:
            text = f.read()
        side = json.loads(text[text.index("{"):])["jobs"][0]["write" if "write" in job else "read"]
        ops += side["iops"] * (ramp + runtime)
    if not writes:
        return "-"
    return f"{recs / ops:.2f} {recs / writes:.2f}"

old = any(csum == "old" for _, _, csum in targets)
logcol = feature == "ppl"
head = f"{'level':<7}{'job':<15}{'off':>10}{'on':>10}{'on/off':>8}{'cost':>7}{'rounds':>12}{'cpu us/MiB off':>16}{'on':>8}{'target':>8}"
if logcol:
    head += f"{'recs/op, /logwrite':>20}"
if old:
    head += f"{'old':>10}{'cost':>7}{'cpu old':>9}{'on/old':>8}"
print(head)
print("-" * len(head))
for level in levels:
    for job in jobs:
        off, coff = med(job, f"r{level}off")
        on, con = med(job, f"r{level}on")
        if feature == "checksums":
            target = "15%" if job == "rand-write-4K" else ("10%" if job.startswith("seq") else "-")
        elif "write" not in job:
            target = "-"
        elif degraded:
            target = "20%"  # partial writes while degraded (full rows record nothing)
        else:
            target = "10%" if job.startswith("seq") else "-"
        lo, hi = spread(job, level)
        line = f"raid{level:<3}{job:<15}{off:>10.0f}{on:>10.0f}{on / off:>8.2f}{(1 - on / off) * 100:>6.0f}%{f'{lo:.2f}-{hi:.2f}':>12}{coff:>16.0f}{con:>8.0f}{target:>8}"
        if logcol:
            line += f"{log_ratios(job, f'r{level}on'):>20}"
        if old:
            o, co = med(job, f"r{level}old")
            line += f"{o:>10.0f}{(1 - o / off) * 100:>6.0f}%{co:>9.0f}{on / o:>8.2f}"
        print(line)
print()
if old:
    print("old: the same array with the feature served by OLD_RAIDD_BIN, in the same rounds; on/old: the new binary's rate over the old one's")
print("off/on: sequential jobs in MiB/s, random jobs in IOPS; median of", rounds, "interleaved round(s)")
if feature == "checksums":
    print("cost: 1 - on/off (the issue's targets: at most 10% on sequential read and write, 15% on random 4K write)")
else:
    print("cost: 1 - on/off, the log (ppl) against policy bitmap (the issue's targets: at most 10% on healthy")
    print("sequential writes, 20% on degraded partial writes; md publishes 30-40% for its PPL)")
print("rounds: the lowest and highest on/off of a single round (off and on ran one after the other)")
print("cpu us/MiB: raidd's user + system CPU time per MiB the job moved")
if logcol:
    print("recs/op, /logwrite: the log's records per client write, and per durable log write (group commit)")
EOF
