#!/usr/bin/env bash
# bench/writehole.sh: what the write-hole journal (consistency policy
# "journal", the RAID5/RAID6 default) costs. BenchmarkWriteHole runs each
# workload on the same array shape with policy bitmap (no journal) and
# journal, in the same run, on memory members; this prints the median
# throughput of each and the journal's cost in percent. Targets (issue 11):
# at most 10% on healthy sequential writes, at most 20% on degraded partial
# writes; md's PPL costs 30-40% by its own documentation.
# BENCHTIME sets -benchtime (default 1s), COUNT the runs (default 5).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
go test -run '^$' -bench 'BenchmarkWriteHole' -benchtime "${BENCHTIME:-1s}" -count "${COUNT:-5}" ./raid | tee -a "$out"
python3 - "$out" <<'PY'
import re, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    m = re.match(r'BenchmarkWriteHole/(\S+)/policy=(\w+)(-\d+)?\s+\d+\s+\S+ ns/op\s+([\d.]+) MB/s.*?([\d.]+) cpu-ns/op', line)
    if m:
        rows.setdefault(m.group(1), {}).setdefault(m.group(2), []).append((float(m.group(4)), float(m.group(5))))
print()
print("%-36s %10s %10s %7s %12s %12s %7s" % ("workload", "bitmap", "journal", "cost", "bitmap", "journal", "cost"))
print("%-36s %10s %10s %7s %12s %12s %7s" % ("", "MB/s", "MB/s", "", "CPU ns/op", "CPU ns/op", ""))
for k, v in rows.items():
    if "bitmap" not in v or "journal" not in v:
        continue
    b = statistics.median(x[0] for x in v["bitmap"])
    j = statistics.median(x[0] for x in v["journal"])
    bc = statistics.median(x[1] for x in v["bitmap"])
    jc = statistics.median(x[1] for x in v["journal"])
    print("%-36s %10.0f %10.0f %6.1f%% %12.0f %12.0f %6.1f%%" % (k, b, j, 100 * (1 - j / b), bc, jc, 100 * (jc / bc - 1)))
print("MB/s: median throughput; CPU ns/op: median process CPU time per write (steadier on a busy machine).")
print("md's PPL, for comparison: 30-40% of write speed, as published for md (issue 11).")
PY
