#!/usr/bin/env bash
# bench/disks.sh: raidd on emulated disks, every level and job as measured /
# ideal, plus one emulated disk served by qemu-nbd as the peer. Every disk is
# a loop device (losetup --direct-io=on) over a file in /dev/shm, throttled
# by a cgroup-v1 blkio group; raidd (serve --direct) and qemu-nbd
# (--cache=none --aio=native) run inside that group. See bench/README.md.
# Needs root, cgroup v1 blkio, losetup, qemu-nbd, fio (nbd engine), nbdinfo,
# python3 and Go (unless RAIDD_BIN is set). Not part of CI.
#
# Knobs (environment):
#   DISKS      members per array                          (default 4)
#   BW         MiB/s per disk and direction               (default 100)
#   IOPS       operations/s per disk and direction        (default 1000)
#   DISK_SIZE  size of each disk                          (default 256M)
#   CHUNK      chunk size of every array                  (default 64K)
#   LEVELS     levels to measure; 6 is skipped unless
#              `raidd create --level 6` works             (default "0 1 5 10 6")
#   RUNTIME    seconds per fio job, after RAMP            (default 10)
#   RAMP       fio ramp_time in seconds                   (default 2)
#   ROUNDS     interleaved rounds; the median is printed  (default 1)
#   CSUM       1: also every level created with --checksums (default 0)
#   POLICY     create's --consistency-policy for RAID5/6: ppl
#              or bitmap (no write-hole log); both ("ppl bitmap")
#              creates each RAID5/6 once per policy, targets
#              raidN+ppl and raidN+bitmap, in the same run  (default: ppl)
#   JOBS       fio jobs to run, by name (seq-read-1M seq-write-1M
#              rand-read-4K rand-write-4K)                 (default: all)
#   FIO        0: skip the fio jobs (precondition only)   (default 1)
#   SCRUB      0: skip the scrub rate                     (default 1)
#   REBUILD    0: skip the rebuild rate                   (default 1)
#   REBUILD_LOAD 0: skip the rebuild under a client load  (default 1)
#   RESYNC     0: skip the resync after a crash           (default 1)
#   SHM        directory for the disk files               (default /dev/shm)
#   RAIDD_BIN  use this raidd binary instead of building one
set -euo pipefail

DISKS=${DISKS:-4}
BW=${BW:-100}
IOPS=${IOPS:-1000}
DISK_SIZE=${DISK_SIZE:-256M}
CHUNK=${CHUNK:-64K}
LEVELS=${LEVELS:-"0 1 5 10 6"}
RUNTIME=${RUNTIME:-10}
RAMP=${RAMP:-2}
ROUNDS=${ROUNDS:-1}
POLICY=${POLICY:-}
CSUM=${CSUM:-0} # 1: every level also with --checksums (target raidN+csum), in the same run
SHM=${SHM:-/dev/shm}
BLKIO=${BLKIO:-/sys/fs/cgroup/blkio}

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)

die() { echo "disks.sh: $*" >&2; exit 2; }

[[ $(id -u) == 0 ]] || die "needs root (loop devices and cgroups)"
if [[ ! -w $BLKIO/blkio.throttle.read_bps_device && ! -e $BLKIO/blkio.throttle.read_bps_device ]]; then
	die "cgroup v1 blkio controller not found at $BLKIO (no blkio.throttle.read_bps_device): this script throttles disks with cgroup v1 blkio only; on a cgroup-v2-only host it cannot run (mount a v1 blkio hierarchy, or set BLKIO to where it is mounted)"
fi
for tool in losetup qemu-nbd fio nbdinfo python3; do
	command -v "$tool" >/dev/null || die "$tool not installed (apt-get install -y util-linux qemu-utils fio libnbd-bin python3)"
done
fio --enghelp=nbd >/dev/null 2>&1 || die "fio has no nbd ioengine"
[[ $DISKS -ge 2 ]] || die "DISKS must be at least 2"

work=$(mktemp -d "$SHM/raidd-disks.XXXXXX")
sock=$(mktemp -d /tmp/rd.XXXXXX) # short paths for unix sockets
cg=$BLKIO/raidd-disks-$$
loops=()
pids=()

prog=disks.sh
# shellcheck source=lib-disks.sh
source "$(dirname "$0")/lib-disks.sh"
trap bench_cleanup EXIT
trap 'exit 130' INT TERM

mkdir "$cg" || die "cannot create the blkio cgroup $cg"

if [[ -n "${RAIDD_BIN:-}" ]]; then
	bin=$RAIDD_BIN
else
	bin=$sock/raidd
	echo "building raidd ..." >&2
	(cd "$repo" && go build -o "$bin" ./cmd/raidd)
fi

bps=$((BW * 1024 * 1024))

# new_disk NAME: a throttled loop device over $work/NAME.img, in $disk.
new_disk() {
	local img=$work/$1.img
	truncate -s "$DISK_SIZE" "$img"
	throttled_loop "$img"
}

# in_cgroup CMD...: run CMD inside the throttled cgroup (in the background
# when called with &).
in_cgroup() {
	echo "$BASHPID" >"$cg/cgroup.procs"
	exec "$@"
}

# wait_sock SOCKET PID EXPORT: wait up to 10 s for a server to listen.
wait_sock() {
	local i
	for ((i = 0; i < 100; i++)); do
		if nbdinfo --size "nbd+unix:///$3?socket=$1" >/dev/null 2>&1; then
			return 0
		fi
		kill -0 "$2" 2>/dev/null || { echo "disks.sh: server on $1 exited:" >&2; cat "$work/$3.log" >&2; return 1; }
		sleep 0.1
	done
	die "server on $1 did not start"
}

targets=()
declare -A members_of # array name -> its member devices
declare -A pid_of     # array name -> its server's pid
declare -A tdevs      # target name -> its disks (for the request counts)

# devstat DEVS...: the reads, writes and flushes the block devices DEVS
# completed, summed (/sys/block/NAME/stat fields 1, 5 and 16).
devstat() {
	local d r=0 w=0 f=0 s
	for d in "$@"; do
		read -ra s <"/sys/block/${d#/dev/}/stat"
		r=$((r + s[0]))
		w=$((w + s[4]))
		f=$((f + ${s[15]:-0}))
	done
	echo "$r $w $f"
}
# devstat_each DEVS...: the reads, writes and flushes each block device
# completed, one "r w f" triple per device on one line.
devstat_each() {
	local d s out=()
	for d in "$@"; do
		read -ra s <"/sys/block/${d#/dev/}/stat"
		out+=("${s[0]} ${s[4]} ${s[15]:-0}")
	done
	echo "${out[*]}"
}
# start_raidd LEVEL [+csum] [POLICY]: create an array of DISKS fresh disks
# (with --checksums when the second argument is given, with
# --consistency-policy POLICY, named in the target, when the third is) and
# serve it with --direct inside the cgroup. Returns 1 when the level cannot
# be created.
start_raidd() {
	local level=$1 suffix=${2:-} pol=${3:-} name=r$1${2:+c}${3:+-$3} i members=()
	for ((i = 0; i < DISKS; i++)); do
		new_disk "$name-d$i"
		members+=("$disk")
	done
	local policy=()
	if [ -n "$pol" ]; then
		policy=(--consistency-policy "$pol")
	elif [ -n "$POLICY" ] && { [ "$level" = 5 ] || [ "$level" = 6 ]; }; then
		policy=(--consistency-policy "$POLICY")
	fi
	if ! "$bin" create --name "$name" --level "$level" --chunk "$CHUNK" ${suffix:+--checksums} "${policy[@]}" --log-level warn "${members[@]}" >"$work/$name.create" 2>&1; then
		echo "raid$level: skipped: raidd create --level $level failed: $(grep -m1 -i error "$work/$name.create" || head -n 1 "$work/$name.create")" >&2
		return 1
	fi
	in_cgroup "$bin" serve --direct --listen "unix:$sock/$name.sock" --control "$sock/$name.ctl" --log-level warn "${members[@]}" \
		>"$work/$name.log" 2>&1 &
	pids+=($!)
	pid_of[$name]=$!
	wait_sock "$sock/$name.sock" $! "$name" || return 1
	members_of[$name]="${members[*]}"
	tdevs[raid$level$suffix${pol:++$pol}]="${members[*]}"
	targets+=("raid$level$suffix${pol:++$pol}:$level:nbd+unix:///$name?socket=$sock/$name.sock")
}

read -ra policies <<<"$POLICY"
for level in $LEVELS; do
	if [[ ${#policies[@]} -gt 1 ]] && { [[ $level == 5 ]] || [[ $level == 6 ]]; }; then
		for pol in "${policies[@]}"; do
			if ! start_raidd "$level" "" "$pol"; then
				[[ $level == 6 ]] || die "raid$level ($pol) could not be created or served"
			fi
		done
	elif ! start_raidd "$level"; then
		[[ $level == 6 ]] || die "raid$level could not be created or served"
	fi
	if [[ $CSUM == 1 ]]; then
		start_raidd "$level" +csum || die "raid$level with --checksums could not be created or served"
	fi
done
[[ ${#targets[@]} -gt 0 ]] || die "no array could be created"

# The peer: one throttled disk, served by qemu-nbd with direct, native AIO.
new_disk peer
in_cgroup qemu-nbd --format=raw --cache=none --aio=native --shared=8 --persistent --export-name=peer \
	--socket="$sock/peer.sock" "$disk" >"$work/peer.log" 2>&1 &
pids+=($!)
wait_sock "$sock/peer.sock" $! peer
tdevs[peer]=$disk
targets+=("peer:peer:nbd+unix:///peer?socket=$sock/peer.sock")

# Precondition: write every target once, so that reads and writes below
# meet written data (steady state, not first-write or never-written costs).
for target in "${targets[@]}"; do
	tname=${target%%:*}
	turi=${target#*:*:}
	size=$(nbdinfo --size "$turi")
	echo "preconditioning $tname ($size bytes) ..." >&2
	fio --name=pre --ioengine=nbd --uri="$turi" --rw=write --bs=1M --iodepth=8 --size="$size" \
		--output-format=json --output="$work/pre.$tname.json" >/dev/null
done

jobs=(
	"seq-read-1M:--rw=read --bs=1M --iodepth=8"
	"seq-write-1M:--rw=write --bs=1M --iodepth=8"
	"rand-read-4K:--rw=randread --bs=4k --iodepth=32"
	"rand-write-4K:--rw=randwrite --bs=4k --iodepth=32"
)
if [[ -n ${JOBS:-} ]]; then
	keep=()
	for job in "${jobs[@]}"; do
		[[ " $JOBS " == *" ${job%%:*} "* ]] && keep+=("$job")
	done
	[[ ${#keep[@]} -gt 0 ]] || die "JOBS=\"$JOBS\" names none of the jobs (${jobs[*]%%:*})"
	jobs=("${keep[@]}")
fi

if [[ ${FIO:-1} != 0 ]]; then
echo "disks: $DISKS per array, each a loop device over $DISK_SIZE in $SHM, $BW MiB/s and $IOPS IOPS per direction; chunk $CHUNK; $ROUNDS round(s) of $RUNTIME s (+$RAMP s ramp) per job" >&2
for ((round = 1; round <= ROUNDS; round++)); do
	for job in "${jobs[@]}"; do
		jname=${job%%:*}
		jargs=${job#*:}
		for target in "${targets[@]}"; do
			tname=${target%%:*}
			turi=${target#*:*:}
			echo "round $round: fio $jname on $tname ..." >&2
			# The disks' request counts around the job, and its wall time,
			# for the requests per client operation table.
			# shellcheck disable=SC2086
			before="$(devstat ${tdevs[$tname]}) $(date +%s.%N)"
			# shellcheck disable=SC2086
			each="$(devstat_each ${tdevs[$tname]})"
			# shellcheck disable=SC2086
			fio --name="$jname" --ioengine=nbd --uri="$turi" $jargs --numjobs=1 \
				--time_based --runtime="$RUNTIME" --ramp_time="$RAMP" \
				--output-format=json --output="$work/$jname.$tname.$round.json" >/dev/null
			# shellcheck disable=SC2086
			echo "$before $(devstat ${tdevs[$tname]}) $(date +%s.%N)" >"$work/$jname.$tname.$round.dev"
			# shellcheck disable=SC2086
			printf '%s\n%s\n' "$each" "$(devstat_each ${tdevs[$tname]})" >"$work/$jname.$tname.$round.disks"
		done
	done
done

python3 - "$work" "$DISKS" "$BW" "$IOPS" "$ROUNDS" "${#jobs[@]}" "${jobs[@]}" "${targets[@]}" <<'EOF'
import json, statistics, sys
work, n, bw, iops, rounds, njobs = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
jobs = [j.split(":", 1)[0] for j in sys.argv[7:7 + njobs]]
targets = [t.split(":", 2)[:2] for t in sys.argv[7 + njobs:]]

def measured(job, target):
    vals = []
    for r in range(1, rounds + 1):
        with open(f"{work}/{job}.{target}.{r}.json") as f:
            text = f.read()
        d = json.loads(text[text.index("{"):])  # skip any notes fio prints first
        j = d["jobs"][0]
        if j.get("error", 0):
            sys.exit(f"fio {job} on {target}: error {j['error']}")
        side = j["write"] if "write" in job else j["read"]
        vals.append(side["bw_bytes"] / 2**20 if job.startswith("seq") else side["iops"])
    return statistics.median(vals)

# ideal(level, job): n disks' worth, less what parity or mirroring must
# cost. Bandwidth in MiB/s for sequential jobs, IOPS for random ones. The
# read and write budgets of a disk are separate (blkio throttles each
# direction), so a RAID5 read-modify-write (2 reads + 2 writes) costs half
# a disk operation of each kind per member: n/2 x IOPS.
#
# Sequential reads: n x bw at every level, parity levels included. Reads
# skip parity, and the parity rotates (left-symmetric), so a long read
# keeps all n members busy, each reading its data chunks and skipping its
# parity chunks. A throttled loop device charges only the bytes read, so a
# skipped parity chunk costs no time and every member delivers its full
# bandwidth of data: n x bw, not (n-1) x bw (which RAID5 reads were shown
# to beat by 1.28-1.52x). A spinning disk pays for the skip with rotation,
# which is where the (n-1) x rule of thumb comes from.
def ideal(level, job):
    if level == "peer":
        return bw if job.startswith("seq") else iops
    if job == "seq-read-1M":
        return n * bw
    if job == "seq-write-1M":
        return {"0": n, "5": n - 1, "6": n - 2, "10": n / 2, "1": 1}[level] * bw
    if job == "rand-read-4K":
        return n * iops
    return {"0": n, "5": n / 2, "6": n / 3, "10": n / 2, "1": 1}[level] * iops

cell = 26
print(f"{'target':<12}" + "".join(f"{j:>{cell}}" for j in jobs))
print(f"{'':<12}" + "".join(f"{'measured / ideal = ratio':>{cell}}" for _ in jobs))
print("-" * (12 + cell * len(jobs)))
worst = []
for name, level in targets:
    row = f"{name:<12}"
    for job in jobs:
        m, i = measured(job, name), ideal(level, job)
        row += f"{f'{m:.0f} / {i:.0f} = {m / i:.2f}':>{cell}}"
        worst.append((m / i, name, job))
    print(row)
print()
print("sequential jobs in MiB/s, random jobs in IOPS; median of", rounds, "round(s)")
print(f"ideal: seq read {n}x bw at every level (rotating parity: all members serve reads); seq write RAID0 {n}x, RAID5 {n-1}x, RAID6 {n-2}x, RAID10 {n/2:g}x, RAID1 1x bw;")
print(f"       rand read {n}x IOPS; rand write RAID0 {n}x, RAID5 {n/2:g}x, RAID6 {n/3:.3g}x, RAID10 {n/2:g}x, RAID1 1x IOPS; peer: one disk")
r, name, job = min(worst)
print(f"lowest ratio: {r:.2f} ({name} {job}); target 0.95")

# Disk requests per client operation: the reads, writes and flushes all
# disks of the target completed per second of the job (ramp included)
# over the client's operations per second (ramp excluded), median over
# rounds: approximate, but it shows what a client operation costs the
# disks (a RAID5 read-modify-write: 2 reads and 2 writes).
def per_op(job, target):
    vals = []
    for r in range(1, rounds + 1):
        with open(f"{work}/{job}.{target}.{r}.dev") as f:
            v = [float(x) for x in f.read().split()]
        r0, w0, f0, t0, r1, w1, f1, t1 = v
        with open(f"{work}/{job}.{target}.{r}.json") as f:
            text = f.read()
        j = json.loads(text[text.index("{"):])["jobs"][0]
        side = j["write"] if "write" in job else j["read"]
        ops = side["iops"] * (t1 - t0)
        vals.append(((r1 - r0) / ops, (w1 - w0) / ops, (f1 - f0) / ops) if ops else (0, 0, 0))
    return tuple(statistics.median(x[i] for x in vals) for i in range(3))

# The busiest disk: the one that completed the most requests (reads,
# writes and flushes) in the job, its requests per client operation, and
# every disk's request count; from the round with the median number of
# client operations. A disk that runs out of operations before the others
# caps the array (a RAID6x4 member that pays 3 reads where the others pay
# 2), which the summed count hides.
def disks(job, target):
    rows = []
    for r in range(1, rounds + 1):
        with open(f"{work}/{job}.{target}.{r}.disks") as f:
            b, a = [list(map(int, line.split())) for line in f.read().splitlines()[:2]]
        with open(f"{work}/{job}.{target}.{r}.dev") as f:
            t0, t1 = [float(x) for x in f.read().split()][3::4]
        with open(f"{work}/{job}.{target}.{r}.json") as f:
            text = f.read()
        j = json.loads(text[text.index("{"):])["jobs"][0]
        ops = (j["write"] if "write" in job else j["read"])["iops"] * (t1 - t0)
        d = [a[i] - b[i] for i in range(len(a))]
        each = [sum(d[i:i + 3]) for i in range(0, len(d), 3)]
        top = max(range(len(each)), key=lambda i: each[i])
        rows.append((ops, tuple(x / ops if ops else 0 for x in d[3 * top:3 * top + 3]), top, each))
    rows.sort(key=lambda x: x[0])
    return rows[len(rows) // 2][1:]

print()
print(f"{'disk requests per client operation (reads / writes / flushes): all disks, and the busiest disk':<12}")
print(f"{'target':<12}" + "".join(f"{j:>{cell}}" for j in jobs))
for name, level in targets:
    print(f"{name:<12}" + "".join(f"{'%.2f / %.2f / %.2f' % per_op(job, name):>{cell}}" for job in jobs))
    if level != "peer":
        print(f"{'  busiest':<12}" + "".join(f"{'d%d: %.2f / %.2f / %.2f' % ((disks(job, name)[1],) + disks(job, name)[0]):>{cell}}" for job in jobs))
print()
print("requests each disk completed in the job (median round by client operations):")
for name, level in targets:
    for job in jobs:
        if level != "peer":
            print(f"  {name:<12}{job:<16}" + " ".join(str(x) for x in disks(job, name)[2]))
EOF
fi

# Scrub rate (raidd check): each array with redundancy is scrubbed once,
# idle, at the default rates (rebuild_max_rate 0: no limit when clients are
# idle). Every row holds data (the precondition wrote it all), so each
# member's data region is read once: the ideal is each disk's sequential
# read bandwidth. The time is the scrub's own, from its start to its finish
# as the array records them (last_scrub in the status). SCRUB=0 skips this
# block.
# redundant_targets prints "TARGET TNAME NAME" for every array with
# redundancy (not the peer, not RAID0): its target entry, its name in the
# tables and its raidd array name.
redundant_targets() {
	local target tname level name
	for target in "${targets[@]}"; do
		tname=${target%%:*}
		level=${target#*:}
		level=${level%%:*}
		[[ $tname == peer || $level == 0 ]] && continue
		name=r$level
		[[ $tname == *+csum ]] && name+=c
		[[ $tname == *+ppl ]] && name+=-ppl
		[[ $tname == *+bitmap ]] && name+=-bitmap
		echo "$target $tname $name"
	done
}

if [[ ${SCRUB:-1} != 0 ]]; then
	echo
	printf '%-8s %12s %10s %22s\n' target "data/member" seconds "MiB/s per member / bw"
	while read -r -u 3 target tname name; do
		ctl="$sock/$name.ctl"
		echo "scrubbing $tname ..." >&2
		"$bin" check --control "$ctl" "$name" >"$work/scrub.$tname.out" 2>&1 || {
			cat "$work/scrub.$tname.out" >&2
			die "raidd check of $tname failed"
		}
		"$bin" status --json --control "$ctl" "$name" >"$work/scrub.$tname.json"
		python3 - "$work/scrub.$tname.json" "$BW" "$tname" <<'EOF'
import json, re, sys
from datetime import datetime
def ts(s):
    # RFC 3339 with up to nanoseconds: keep microseconds for fromisoformat.
    m = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$", s)
    frac = (m.group(2) or "0")[:6].ljust(6, "0")
    tz = "+00:00" if m.group(3) == "Z" else m.group(3)
    return datetime.fromisoformat(f"{m.group(1)}.{frac}{tz}").timestamp()
a = json.load(open(sys.argv[1]))["arrays"][0]
s = a["last_scrub"]
per_member = s["total_rows"] * a["chunk"]
secs = ts(s["finished"]) - ts(s["started"])
rate = per_member / 2**20 / secs
bw = float(sys.argv[2])
print(f"{sys.argv[3]:<8} {per_member / 2**20:>10.0f}Mi {secs:>10.2f} {f'{rate:.0f} / {bw:.0f} = {rate / bw:.2f}':>22}")
EOF
	done 3< <(redundant_targets)
	echo "scrub: every member's data region read once; target 0.9 of a disk's sequential read bandwidth"
fi

# Rebuild rate: in each array with redundancy, a member is failed and a
# fresh throttled disk added; the rebuild onto it runs idle at the default
# rates, then again (another member) under a client load, where the
# default rebuild_min_rate (16 MiB/s per member) is what it is promised.
# Every row holds data (the precondition wrote it all, and a block device
# cannot tell holes anyway), so the new member's data region is written
# whole: the idle ideal is one disk's sequential write bandwidth. The time
# is taken between the array's own rebuild-started and rebuild-finished
# events. REBUILD=0 skips this block, REBUILD_LOAD=0 the loaded rebuild.
MIN_RATE=16 # MiB/s: raidd serve's default --rebuild-min-rate

# job_rate JSON TNAME KIND [MINRATE LOADJSON]: print the rate of the last
# KIND (rebuild or resync) in the status JSON from its KIND-started and
# KIND-finished events, as a fraction of BW; with LOADJSON (fio's output
# during it) also against MINRATE, and the client's IOPS.
job_rate() {
	python3 - "$1" "$BW" "$2" "${4:-0}" "${5:-}" "$3" <<'EOF'
import json, re, sys
from datetime import datetime, timezone
a = json.load(open(sys.argv[1]))["arrays"][0]
ev = a.get("history", [])
def t(e):
    # RFC 3339 with up to nanoseconds: keep microseconds for fromisoformat.
    m = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$", e["time"])
    frac = (m.group(2) or "0")[:6].ljust(6, "0")
    tz = "+00:00" if m.group(3) == "Z" else m.group(3)
    return datetime.fromisoformat(f"{m.group(1)}.{frac}{tz}").timestamp()
kind = sys.argv[6]
start = [t(e) for e in ev if e["kind"] == f"{kind}-started"]
end = [t(e) for e in ev if e["kind"] == f"{kind}-finished"]
if not start or not end:
    sys.exit(f"{sys.argv[3]}: no {kind}-started/finished events in the history")
secs = end[-1] - start[-1]
per_member = a["last_recovery" if kind == "rebuild" else "last_resync"]["total_rows"] * a["chunk"]
rate = per_member / 2**20 / secs
bw, minrate = float(sys.argv[2]), float(sys.argv[4])
line = f"{sys.argv[3]:<8} {per_member / 2**20:>10.0f}Mi {secs:>10.2f} {f'{rate:.0f} / {bw:.0f} = {rate / bw:.2f}':>22}"
if len(sys.argv) > 5 and sys.argv[5]:
    text = open(sys.argv[5]).read()
    j = json.loads(text[text.index("{"):])["jobs"][0]
    iops = j["read"]["iops"] + j["write"]["iops"]
    line += f" {f'{rate / minrate:.2f}':>12} {iops:>12.0f}"
print(line)
EOF
}

# rebuild_rate TNAME NAME MEMBER [URI]: fail MEMBER of array NAME, add a
# fresh disk, wait for the rebuild and print its rate. With URI, fio runs
# random 4K reads and writes (half each, iodepth 16) on the array from
# before the add until the rebuild has finished, and the client's IOPS
# during it are printed too.
rebuild_rate() {
	local tname=$1 name=$2 member=$3 uri=${4:-} ctl="$sock/$2.ctl" fpid="" i
	echo "rebuilding $member of $tname${uri:+ under a client load} ..." >&2
	"$bin" fail --control "$ctl" "$name" "$member" >/dev/null
	new_disk "$name-new$RANDOM"
	if [[ -n $uri ]]; then
		fio --name=load --ioengine=nbd --uri="$uri" --rw=randrw --bs=4k --iodepth=16 \
			--time_based --runtime=3600 --output-format=json --output="$work/load.$tname.json" >/dev/null &
		fpid=$!
		sleep 1
	fi
	"$bin" add --control "$ctl" "$name" "$disk" >/dev/null
	for ((i = 0; i < 6000; i++)); do
		# status exits non-zero while the array is degraded
		"$bin" status --json --control "$ctl" "$name" >"$work/rebuild.$tname.json" || true
		python3 -c 'import json,sys; a=json.load(open(sys.argv[1]))["arrays"][0]; sys.exit(0 if a.get("recovery") is None and a.get("last_recovery") else 1)' "$work/rebuild.$tname.json" && break
		sleep 0.2
	done
	if [[ -n $fpid ]]; then
		kill -INT "$fpid"
		wait "$fpid" || true
	fi
	job_rate "$work/rebuild.$tname.json" "$tname" rebuild "$MIN_RATE" "${fpid:+$work/load.$tname.json}"
}

if [[ ${REBUILD:-1} != 0 ]]; then
	for load in 0 1; do
		[[ $load == 1 && ${REBUILD_LOAD:-1} == 0 ]] && continue
		echo
		if [[ $load == 0 ]]; then
			echo "rebuild, idle:"
			printf '%-8s %12s %10s %22s\n' target "data/member" seconds "MiB/s written / bw"
		else
			echo "rebuild under random 4K client I/O (fio randrw iodepth 16), rebuild_min_rate $MIN_RATE MiB/s:"
			printf '%-8s %12s %10s %22s %12s %12s\n' target "data/member" seconds "MiB/s written / bw" "/ min_rate" "client IOPS"
		fi
		while read -r -u 3 target tname name; do
			read -r -a mem <<<"${members_of[$name]}"
			if [[ $load == 0 ]]; then
				rebuild_rate "$tname" "$name" "${mem[0]}"
			else
				rebuild_rate "$tname" "$name" "${mem[1]}" "${target#*:*:}"
			fi
		done 3< <(redundant_targets)
	done
	echo "rebuild: the new member's data region written once; target 0.95 of a disk's sequential write bandwidth when idle, and at least rebuild_min_rate under load"
fi

# Resync after a crash: in each array with redundancy, fio writes 1 MiB
# sequentially, the server is killed (SIGKILL) in the middle of it and
# started again on the same members; the rows the write-intent bitmap left
# dirty are resynced. Printed: the dirty rows' data per member over the
# resync's time (between its resync-started and resync-finished events), as
# a fraction of one disk's sequential bandwidth (a parity resync reads
# every member's rows once; a mirror's reads one copy and writes the
# others). RESYNC=0 skips this block.
if [[ ${RESYNC:-1} != 0 ]]; then
	echo
	echo "resync after a crash (SIGKILL during sequential 1M writes):"
	printf '%-8s %12s %10s %22s\n' target "dirty/member" seconds "MiB/s per member / bw"
	while read -r -u 3 target tname name; do
		ctl="$sock/$name.ctl"
		"$bin" status --json --control "$ctl" "$name" >"$work/pre-crash.$tname.json" || true
		read -r -a cur < <(python3 -c 'import json,sys; a=json.load(open(sys.argv[1]))["arrays"][0]; print(" ".join(d["path"] for d in a["members"] if d["state"] in ("active", "spare")))' "$work/pre-crash.$tname.json")
		echo "crashing $tname under writes ..." >&2
		fio --name=crash --ioengine=nbd --uri="${target#*:*:}" --rw=write --bs=1M --iodepth=8 \
			--time_based --runtime=60 >/dev/null 2>&1 &
		fpid=$!
		sleep 3
		kill -9 "${pid_of[$name]}"
		wait "$fpid" 2>/dev/null || true
		in_cgroup "$bin" serve --direct --listen "unix:$sock/$name.sock" --control "$ctl" --log-level warn "${cur[@]}" \
			>>"$work/$name.log" 2>&1 &
		pids+=($!)
		pid_of[$name]=$!
		wait_sock "$sock/$name.sock" $! "$name"
		for ((i = 0; i < 6000; i++)); do
			"$bin" status --json --control "$ctl" "$name" >"$work/resync.$tname.json" 2>/dev/null || true
			python3 -c 'import json,sys; a=json.load(open(sys.argv[1]))["arrays"][0]; sys.exit(0 if a.get("resync") is None and a.get("last_resync") else 1)' "$work/resync.$tname.json" 2>/dev/null && break
			sleep 0.2
		done
		job_rate "$work/resync.$tname.json" "$tname" resync
	done 3< <(redundant_targets)
	echo "resync: the dirty rows of each member read once; ideal: one disk's sequential bandwidth"
fi
