#!/usr/bin/env bash
# bench/writehole.sh: what the write-hole log (consistency policy "ppl",
# the RAID5/RAID6 default: a partial parity log) costs.
# BenchmarkWriteHole runs each workload on the same array shape with policy
# bitmap (no log) and ppl, one right after the other, on memory
# members; this runs it COUNT times (default 5), so that the two policies
# alternate in time, and prints, per workload, the median throughput and
# CPU time per write of each and the median of the per-round costs.
# Targets (issue 11): at most 10% on healthy sequential writes, at most 20%
# on degraded partial writes; md's PPL costs 30-40% of write speed by its
# own documentation. BENCHTIME sets -benchtime (default 1s), BENCH narrows
# the workloads (a -bench regexp below BenchmarkWriteHole/).
# Run it under the shared lock on a shared machine:
#   flock /work/coord/bench.lock bench/writehole.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
out=$(mktemp)
bin=$(mktemp)
trap 'rm -f "$out" "$bin"' EXIT
go test -c -o "$bin" ./raid
echo "load before: $(uptime)"
for round in $(seq "${COUNT:-5}"); do
	"$bin" -test.run '^$' -test.bench "^BenchmarkWriteHole$/${BENCH:-}" -test.benchtime "${BENCHTIME:-1s}" -test.count 1 | grep '^Benchmark' | tee -a "$out"
done
echo "load after: $(uptime)"
python3 - "$out" <<'PY'
import re, statistics, sys
rows, order = {}, []
for line in open(sys.argv[1]):
    m = re.match(r'BenchmarkWriteHole/(\S+)/policy=(\w+)(-\d+)?\s+\d+\s+\S+ ns/op\s+([\d.]+) MB/s.*?([\d.]+) cpu-ns/op', line)
    if m:
        if m.group(1) not in rows:
            order.append(m.group(1))
        rows.setdefault(m.group(1), {}).setdefault(m.group(2), []).append((float(m.group(4)), float(m.group(5))))
med = statistics.median
print()
print("%-34s %8s %8s %7s %10s %10s %7s" % ("workload", "bitmap", "ppl", "cost", "bitmap", "ppl", "cost"))
print("%-34s %8s %8s %7s %10s %10s %7s" % ("", "MB/s", "MB/s", "(MB/s)", "CPU ns/op", "CPU ns/op", "(CPU)"))
for k in order:
    v = rows[k]
    if "bitmap" not in v or "ppl" not in v:
        continue
    pairs = list(zip(v["bitmap"], v["ppl"]))
    tput = med(100 * (1 - j[0] / b[0]) for b, j in pairs)
    cpu = med(100 * (j[1] / b[1] - 1) for b, j in pairs)
    print("%-34s %8.0f %8.0f %6.1f%% %10.0f %10.0f %6.1f%%" % (
        k, med(x[0] for x in v["bitmap"]), med(x[0] for x in v["ppl"]), tput,
        med(x[1] for x in v["bitmap"]), med(x[1] for x in v["ppl"]), cpu))
print("MB/s: median throughput; CPU ns/op: median process CPU time per write (steadier on a busy")
print("machine); cost: median over the rounds of the log's throughput loss and CPU increase")
print("against the bitmap run just before it.")
print("md's PPL, for comparison: 30-40% of write speed, as published for md (issue 11).")
PY
